//! Parsing of human-written quantities: durations (`25ms`), rates (`100Mbit`)
//! and byte sizes (`64KiB`). Used by CCA spec strings and scenario files so
//! that every tool accepts the same spellings.

use std::time::Duration;

/// Split `"25ms"` into `(25.0, "ms")`.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    // No unit starts with `e`/`E`, so exponents like `1e6` stay in the number.
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(text.len());
    let number: f64 = text[..end].parse().ok()?;
    number.is_finite().then_some((number, text[end..].trim()))
}

/// Parse a duration: `1s`, `25ms`, `100us`, `500ns`, `2min`; a bare number is seconds.
///
/// Negative, non-finite and too-long values (more than [`Duration::MAX`],
/// 18446744073709551615 s) are errors, never panics.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (value, unit) = split_number(text)
        .ok_or_else(|| format!("`{text}` is not a duration; write e.g. 25ms, 1s, 100us"))?;
    let scale = match unit {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "min" | "m" => 60.0,
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{text}`; use ns, us, ms, s or min"
            ))
        }
    };
    let secs = value * scale;
    if secs < 0.0 {
        return Err(format!("`{text}` is negative; a duration must be >= 0"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| {
        format!(
            "`{text}` is out of range; the longest duration is {}s (about 5.8e11 years)",
            Duration::MAX.as_secs()
        )
    })
}

/// Parse a rate into bits per second: `100Mbit`, `10Gbps`, `1.5Mbit/s`, `9600bit`.
pub fn parse_rate_bps(text: &str) -> Result<f64, String> {
    let (value, unit) = split_number(text)
        .ok_or_else(|| format!("`{text}` is not a rate; write e.g. 100Mbit, 10Gbit"))?;
    let unit = unit.trim_end_matches("/s").to_ascii_lowercase();
    let scale = match unit.as_str() {
        "bit" | "bps" | "b" => 1.0,
        "kbit" | "kbps" | "k" => 1e3,
        "mbit" | "mbps" | "m" => 1e6,
        "gbit" | "gbps" | "g" => 1e9,
        "" => return Err(format!("`{text}` has no unit; write e.g. {value}Mbit")),
        other => {
            return Err(format!(
                "unknown rate unit `{other}` in `{text}`; use bit, kbit, Mbit or Gbit (per second)"
            ))
        }
    };
    let bps = value * scale;
    if bps <= 0.0 {
        return Err(format!("`{text}` must be a positive rate"));
    }
    Ok(bps)
}

/// Parse a byte size: `1500`, `64KB`, `64KiB`, `1MB`, `2MiB`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let (value, unit) = split_number(text)
        .ok_or_else(|| format!("`{text}` is not a size; write e.g. 1500, 64KiB, 1MB"))?;
    let scale = match unit {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "KiB" => 1024.0,
        "MB" => 1e6,
        "MiB" => 1024.0 * 1024.0,
        "GB" => 1e9,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}`; use B, KB, KiB, MB, MiB, GB or GiB"
            ))
        }
    };
    if value < 0.0 {
        return Err(format!("`{text}` is negative; a size must be >= 0"));
    }
    Ok((value * scale).round() as u64)
}

/// Format a duration for humans: `25ms`, `1.5s`, `100us`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("25ms").unwrap(), Duration::from_millis(25));
        assert_eq!(parse_duration("1").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert!(parse_duration("5 parsecs")
            .unwrap_err()
            .contains("unknown time unit"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn huge_or_non_finite_durations_are_errors_not_panics() {
        for text in [
            "1e20s",
            "1e20",
            "1e18min",
            "1e308min",
            "18446744073709551616s",
        ] {
            let e = parse_duration(text).unwrap_err();
            assert!(e.contains("out of range"), "{text}: {e}");
            assert!(e.contains("18446744073709551615s"), "{text}: {e}");
        }
        for text in ["inf s", "inf", "NaN", "nan s", "1e400s", "-inf"] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
        // The largest durations that fit still parse.
        assert_eq!(
            parse_duration("1e19s").unwrap(),
            Duration::from_secs(10_000_000_000_000_000_000)
        );
        assert_eq!(
            parse_duration("1e6min").unwrap(),
            Duration::from_secs(60_000_000)
        );
    }

    #[test]
    fn rates_and_sizes_parse_with_units() {
        assert_eq!(parse_rate_bps("100Mbit").unwrap(), 100e6);
        assert_eq!(parse_rate_bps("10Gbps").unwrap(), 10e9);
        assert_eq!(parse_rate_bps("1.5mbit/s").unwrap(), 1.5e6);
        assert!(parse_rate_bps("100").unwrap_err().contains("no unit"));
        assert_eq!(parse_bytes("64KiB").unwrap(), 65536);
        assert_eq!(parse_bytes("1500").unwrap(), 1500);
        assert!(parse_bytes("3 apples").is_err());
    }

    #[test]
    fn durations_format_compactly() {
        assert_eq!(format_duration(Duration::from_millis(25)), "25ms");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1500us");
    }
}
