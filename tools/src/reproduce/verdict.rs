//! The verdict rules: when a row counts as reproduced.
//!
//! A published number `p` (or range `[a, b]`) and the tolerance we claim
//! give a **band** of values that agree with it ([`super::Tolerance::band`]).
//! Our number is the mean over seeds with its 95 % Student-t interval
//! `[lo, hi]` ([`crate::stats::mean_ci`]). Then:
//!
//! - **reproduced**: the whole interval (cut at the metric's floor and
//!   ceiling, which the mean cannot pass) lies inside the band;
//! - **differs**: the whole interval lies outside it;
//! - **inconclusive**: the interval crosses an edge of the band (or one seed
//!   gives no interval). The report says how many seeds would settle it: the
//!   least `n` with `t(0.975, n-1) · s / √n` below the mean's distance to
//!   the nearest edge, `s` the observed standard deviation;
//! - **not measurable at this resolution**: the published value lies beyond
//!   what the metric can take in this setup (below its floor, e.g. a time
//!   measured in 1-s windows cannot be 0.1 s; above its ceiling, e.g. a
//!   Jain's index above 1), so no run can agree or disagree with it.
//!
//! A mean inside the band with a wide interval is therefore not a
//! reproduction: noise cannot pass a row.

use serde::Serialize;

use super::Published;
use crate::stats::{t_quantile, MeanCi};

/// The most seeds [`seeds_needed`] looks for; beyond it the row says "more
/// than" this.
pub const MAX_SEEDS: u64 = 10_000;

/// Whether a row's number matches the published one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The whole 95 % interval lies inside the tolerance band.
    Reproduced,
    /// The interval crosses an edge of the band, or there is only one value.
    Inconclusive {
        /// Seeds that would likely settle it at the observed spread (`None`:
        /// one value, no spread to go by, or more than [`MAX_SEEDS`]).
        seeds_needed: Option<u64>,
    },
    /// The whole interval lies outside the band: `by` = mean - published
    /// (or the nearest end of a range), `relative` = that / |published|.
    Differs {
        /// Signed difference.
        by: f64,
        /// Signed difference relative to the published value.
        relative: f64,
    },
    /// The published value lies beyond the metric's floor or ceiling in
    /// this setup (`limit`), where no run can reach it.
    NotMeasurable {
        /// The floor or ceiling the published value lies beyond.
        limit: f64,
    },
    /// No published number: we only measure.
    Measured,
    /// No run defined the metric.
    NoData,
}

/// What a metric can take in a scenario: its floor and ceiling.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounds {
    /// The least value (e.g. 1 for a max/min ratio, the window for a time
    /// measured in windows).
    pub floor: Option<f64>,
    /// The greatest value (e.g. 1 for Jain's index).
    pub ceiling: Option<f64>,
}

/// The verdict for our values against a published number and its band.
pub fn verdict(
    published: Option<Published>,
    band: Option<[f64; 2]>,
    bounds: Bounds,
    ours: Option<&MeanCi>,
) -> Verdict {
    let Some(p) = published else {
        return Verdict::Measured;
    };
    let (lo_p, hi_p) = match p {
        Published::Value(v) => (v, v),
        Published::Range([a, b]) => (a, b),
    };
    if let Some(f) = bounds.floor.filter(|&f| hi_p < f - 1e-12) {
        return Verdict::NotMeasurable { limit: f };
    }
    if let Some(c) = bounds.ceiling.filter(|&c| lo_p > c + 1e-12) {
        return Verdict::NotMeasurable { limit: c };
    }
    let Some(o) = ours else {
        return Verdict::NoData;
    };
    let [lo, hi] = band.unwrap_or([lo_p, hi_p]);
    let (Some(ci_lo), Some(ci_hi)) = (o.ci95_low, o.ci95_high) else {
        return Verdict::Inconclusive { seeds_needed: None };
    };
    // The mean cannot lie beyond what the metric can take: the interval is
    // cut at the floor and ceiling (a Jain's index of 0.999 ± 0.002 is
    // within [0.997, 1]).
    let ci_lo = bounds.floor.map_or(ci_lo, |f| ci_lo.max(f));
    let ci_hi = bounds.ceiling.map_or(ci_hi, |c| ci_hi.min(c));
    let eps = 1e-12;
    if ci_lo >= lo - eps && ci_hi <= hi + eps {
        return Verdict::Reproduced;
    }
    if ci_hi < lo - eps || ci_lo > hi + eps {
        let d = p.distance(o.mean);
        let by = if o.mean < p.centre() { -d } else { d };
        return Verdict::Differs {
            by,
            relative: by / p.centre().abs().max(1e-12),
        };
    }
    // The distance the interval's half-width must shrink below.
    let margin = if o.mean < lo {
        lo - o.mean
    } else if o.mean > hi {
        o.mean - hi
    } else {
        (o.mean - lo).min(hi - o.mean)
    };
    Verdict::Inconclusive {
        seeds_needed: o.sd.and_then(|sd| seeds_needed(sd, margin)),
    }
}

/// The least number of seeds whose 95 % half-width `t(0.975, n-1) · sd / √n`
/// is below `margin`; `None` beyond [`MAX_SEEDS`] (or a zero margin).
pub fn seeds_needed(sd: f64, margin: f64) -> Option<u64> {
    if margin.is_nan() || margin <= 0.0 || !sd.is_finite() {
        return None;
    }
    if sd == 0.0 {
        return Some(2);
    }
    // The half-width falls monotonically with n: bisect.
    let half = |n: u64| t_quantile(n as usize - 1) * sd / (n as f64).sqrt();
    if half(MAX_SEEDS) >= margin {
        return None;
    }
    let (mut lo, mut hi) = (2u64, MAX_SEEDS);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if half(mid) < margin {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::mean_ci;

    fn judge(published: Published, band: [f64; 2], bounds: Bounds, values: &[f64]) -> Verdict {
        verdict(
            Some(published),
            Some(band),
            bounds,
            mean_ci(values).as_ref(),
        )
    }

    #[test]
    fn a_narrow_interval_inside_the_band_reproduces() {
        let v = judge(
            Published::Value(1.0),
            [0.8, 1.25],
            Bounds::default(),
            &[1.0, 1.05, 0.98, 1.02, 1.01],
        );
        assert_eq!(v, Verdict::Reproduced);
    }

    #[test]
    fn a_mean_inside_the_band_with_a_wide_interval_is_inconclusive() {
        // The Libra row of that shape: mean 1.18, interval ±0.42 against a
        // band of [0.8, 1.25]. The old rule (mean within tolerance) passed it.
        let values = [0.7, 1.9, 0.8, 1.6, 0.9];
        let o = mean_ci(&values).unwrap();
        assert!(o.mean > 0.8 && o.mean < 1.25, "{o:?}");
        let v = judge(
            Published::Value(1.0),
            [0.8, 1.25],
            Bounds::default(),
            &values,
        );
        match v {
            Verdict::Inconclusive {
                seeds_needed: Some(n),
            } => {
                assert!(n > 5, "{n} seeds would settle it, but 5 did not");
                // At that many seeds, the half-width at the same spread is
                // inside the margin; one fewer is not.
                let sd = o.sd.unwrap();
                let margin = (o.mean - 0.8).min(1.25 - o.mean);
                let half = |n: u64| t_quantile(n as usize - 1) * sd / (n as f64).sqrt();
                assert!(half(n) < margin && half(n - 1) >= margin);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_interval_beyond_the_band_differs_and_one_crossing_its_edge_does_not() {
        let v = judge(
            Published::Value(1.0),
            [0.75, 1.25],
            Bounds::default(),
            &[1.5, 1.6, 1.4, 1.55, 1.45],
        );
        match v {
            Verdict::Differs { by, relative } => {
                assert!((by - 0.5).abs() < 1e-9);
                assert!((relative - 0.5).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
        // Mean outside, interval reaching into the band: not settled.
        let v = judge(
            Published::Value(1.0),
            [0.75, 1.25],
            Bounds::default(),
            &[1.0, 1.6, 1.2, 1.55, 1.45],
        );
        assert!(matches!(v, Verdict::Inconclusive { .. }), "{v:?}");
    }

    #[test]
    fn ranges_are_bands_of_their_own_and_one_value_never_reproduces() {
        let range = Published::Range([0.975, 0.988]);
        assert_eq!(
            judge(
                range,
                [0.975, 0.988],
                Bounds::default(),
                &[0.98, 0.981, 0.982]
            ),
            Verdict::Reproduced
        );
        assert_eq!(
            judge(range, [0.975, 0.988], Bounds::default(), &[0.98]),
            Verdict::Inconclusive { seeds_needed: None }
        );
        assert!(matches!(
            judge(range, [0.965, 0.998], Bounds::default(), &[0.9, 0.91, 0.92]),
            Verdict::Differs { by, .. } if by < 0.0
        ));
    }

    #[test]
    fn a_value_below_the_metrics_floor_is_not_measurable_even_at_the_floor() {
        // "Time to reach the ratio" measured in 1-s windows is at least 1 s;
        // the published 0.1 s with a ±1.0 tolerance would pass every run
        // that reaches the ratio in the first window, however unfair.
        let floor = Bounds {
            floor: Some(1.0),
            ceiling: None,
        };
        let v = judge(Published::Value(0.1), [0.0, 1.1], floor, &[1.0, 1.0, 1.0]);
        assert_eq!(v, Verdict::NotMeasurable { limit: 1.0 });
        // In 0.1-s steps it is measurable.
        let fine = Bounds {
            floor: Some(0.1),
            ceiling: None,
        };
        let v = judge(Published::Value(0.1), [0.0, 0.2], fine, &[0.1, 0.1, 0.2]);
        assert!(!matches!(v, Verdict::NotMeasurable { .. }), "{v:?}");
        // A ceiling works the same way.
        let jain = Bounds {
            floor: None,
            ceiling: Some(1.0),
        };
        assert_eq!(
            judge(Published::Value(1.2), [1.1, 1.3], jain, &[0.99, 0.98]),
            Verdict::NotMeasurable { limit: 1.0 }
        );
    }

    #[test]
    fn the_interval_is_cut_at_the_ceiling_the_mean_cannot_pass() {
        let jain = Bounds {
            floor: None,
            ceiling: Some(1.0),
        };
        let values = [0.999, 0.997, 0.9995];
        assert!(mean_ci(&values).unwrap().ci95_high.unwrap() > 1.0);
        assert_eq!(
            judge(Published::Range([0.99, 1.0]), [0.99, 1.0], jain, &values),
            Verdict::Reproduced
        );
        assert!(matches!(
            judge(
                Published::Range([0.99, 1.0]),
                [0.99, 1.0],
                Bounds::default(),
                &values
            ),
            Verdict::Inconclusive { .. }
        ));
    }

    #[test]
    fn no_published_number_is_measured_and_no_values_is_no_data() {
        assert_eq!(
            verdict(None, None, Bounds::default(), mean_ci(&[1.0, 2.0]).as_ref()),
            Verdict::Measured
        );
        assert_eq!(
            verdict(
                Some(Published::Value(1.0)),
                Some([0.9, 1.1]),
                Bounds::default(),
                None
            ),
            Verdict::NoData
        );
    }

    #[test]
    fn seeds_needed_follows_the_t_interval() {
        // sd 1, margin 1: t(0.975, n-1)/sqrt(n) < 1 first at n = 7
        // (2.447/2.646 = 0.925; n = 6: 2.571/2.449 = 1.05).
        assert_eq!(seeds_needed(1.0, 1.0), Some(7));
        assert_eq!(seeds_needed(1.0, 0.0), None);
        assert_eq!(seeds_needed(1.0, 1e-4), None);
        assert_eq!(seeds_needed(0.0, 0.1), Some(2));
    }
}
