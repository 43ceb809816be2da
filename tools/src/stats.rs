//! Statistics over replicated runs: the mean and the 95 % confidence interval
//! of a metric over seeds.
//!
//! One function, [`mean_ci`], serves `tollgate sim` with several seeds and
//! `tollgate campaign merge`, so both report the same numbers. The interval
//! is Student's t: `mean ± t(0.975, n-1) · s / √n`, with `s` the sample
//! standard deviation (n-1 in the denominator) and the t quantile from
//! `statrs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Confidence level of every interval Tollgate reports.
pub const CONFIDENCE: f64 = 0.95;

/// The mean of a metric over runs, with its 95 % confidence interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeanCi {
    /// Number of values (runs).
    pub n: usize,
    /// Arithmetic mean, in the metric's unit.
    pub mean: f64,
    /// Sample standard deviation (n-1 in the denominator), in the metric's
    /// unit; `None` for n = 1.
    pub sd: Option<f64>,
    /// Half-width of the 95 % interval, `t(0.975, n-1) · sd / √n`, in the
    /// metric's unit; `None` for n = 1 (one value says nothing about the
    /// spread).
    pub half_width: Option<f64>,
    /// Lower end of the interval (`mean - half_width`), in the metric's unit.
    pub ci95_low: Option<f64>,
    /// Upper end of the interval (`mean + half_width`), in the metric's unit.
    pub ci95_high: Option<f64>,
}

/// The two-sided quantile `t(1 - (1 - CONFIDENCE)/2, dof)` of Student's t
/// distribution (2.776 for 4 degrees of freedom).
///
/// # Panics
///
/// If `dof` is 0 (there is no interval for a single value).
pub fn t_quantile(dof: usize) -> f64 {
    assert!(dof > 0, "Student's t needs at least one degree of freedom");
    let t = StudentsT::new(0.0, 1.0, dof as f64).expect("valid Student's t parameters");
    t.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0)
}

/// Mean and 95 % Student-t confidence interval of `values`; `None` when
/// there are none. Non-finite values are not expected (metrics that could
/// not be measured are left out by the caller).
pub fn mean_ci(values: &[f64]) -> Option<MeanCi> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some(MeanCi {
            n,
            mean,
            sd: None,
            half_width: None,
            ci95_low: None,
            ci95_high: None,
        });
    }
    let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let half = t_quantile(n - 1) * sd / (n as f64).sqrt();
    Some(MeanCi {
        n,
        mean,
        sd: Some(sd),
        half_width: Some(half),
        ci95_low: Some(mean - half),
        ci95_high: Some(mean + half),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95 % critical values from any Student t table.
        for (dof, t) in [
            (1, 12.706),
            (2, 4.303),
            (4, 2.776),
            (9, 2.262),
            (29, 2.045),
            (1000, 1.962),
        ] {
            assert!(
                (t_quantile(dof) - t).abs() < 5e-4,
                "dof {dof}: {}",
                t_quantile(dof)
            );
        }
    }

    #[test]
    fn mean_and_interval_of_known_values() {
        let m = mean_ci(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(m.n, 3);
        assert!((m.mean - 2.0).abs() < 1e-12);
        assert!((m.sd.unwrap() - 1.0).abs() < 1e-12);
        // 4.3027 * 1 / sqrt(3)
        assert!((m.half_width.unwrap() - 2.4841).abs() < 1e-3, "{m:?}");
        assert!((m.ci95_low.unwrap() - (2.0 - m.half_width.unwrap())).abs() < 1e-12);
        // Identical values: no spread.
        let c = mean_ci(&[0.5; 4]).unwrap();
        assert_eq!(c.half_width, Some(0.0));
        // One value: a mean, no interval.
        let one = mean_ci(&[7.0]).unwrap();
        assert_eq!((one.mean, one.sd, one.half_width), (7.0, None, None));
        assert_eq!(mean_ci(&[]), None);
    }
}
