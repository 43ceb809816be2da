//! Fairness metrics: Jain's index, the max/min ratio, and the time until
//! a windowed ratio reaches a target and holds it.
//!
//! - Jain's index over throughputs `x_i`: `(sum x)^2 / (n * sum x^2)`
//!   (1 = perfectly fair, `1/n` = one flow takes everything).
//! - Fairness ratio: `max x / min x` (1 = fair; `None` when a flow got nothing).
//! - Time to reach a fairness ratio: from the moment all flows are active
//!   until the windowed ratio first falls to the target and stays at or below
//!   it for the hold time.
//! - Utilization: bits the bottleneck delivered / capacity x time.

/// Jain's fairness index; `None` for no flows or all-zero throughputs.
pub fn jain(x: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    (n > 0.0 && s2 > 0.0).then(|| s * s / (n * s2))
}

/// Max / min; `None` for no flows or a zero minimum.
pub fn fairness_ratio(x: &[f64]) -> Option<f64> {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = x.iter().copied().fold(f64::INFINITY, f64::min);
    (!x.is_empty() && min > 0.0).then(|| max / min)
}

/// First time `t[k] >= from` at which `ratio[k] <= target` and stays so for
/// every sample in `[t[k], t[k] + hold]` (the run must last that long);
/// returned relative to `from`.
pub fn time_to_ratio(
    t: &[f64],
    ratio: &[Option<f64>],
    from: f64,
    target: f64,
    hold: f64,
) -> Option<f64> {
    let ok = |k: usize| ratio[k].is_some_and(|r| r <= target);
    let end = *t.last()?;
    for k in 0..t.len() {
        if t[k] + 1e-9 < from || !ok(k) {
            continue;
        }
        if t[k] + hold > end + 1e-9 {
            return None;
        }
        let held = (k..t.len())
            .take_while(|&j| t[j] <= t[k] + hold + 1e-9)
            .all(ok);
        if held {
            return Some(t[k] - from);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_and_ratio() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
        assert_eq!(fairness_ratio(&[2.0, 8.0]), Some(4.0));
        assert_eq!(fairness_ratio(&[2.0, 0.0]), None);
    }

    #[test]
    fn time_to_ratio_needs_the_hold() {
        let t: Vec<f64> = (0..10).map(f64::from).collect();
        let mut r = vec![Some(3.0); 10];
        r[3] = Some(1.1); // a blip, not held
        for x in r.iter_mut().skip(5) {
            *x = Some(1.2);
        }
        assert_eq!(time_to_ratio(&t, &r, 1.0, 1.5, 2.0), Some(4.0));
        assert_eq!(time_to_ratio(&t, &r, 1.0, 1.1, 2.0), None);
    }
}
