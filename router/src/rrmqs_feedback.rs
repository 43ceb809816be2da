//! RRMQS's feedback loop: from each window's slowdown index `i = v / v'` of
//! a variant to the action on its main-queue packets in the next window.
//!
//! **`drop`** (the thesis, L. He 2020, section 3.4): `i > upper` (1.2) in
//! the last window drops every main-queue packet of the variant in the next
//! one; `i < lower` (0.8) puts them in a priority band; otherwise nothing,
//! and a window without an index (no packet of the variant in one of the two
//! sets) resets the action. Its dropped packets are not metered, so a
//! dropped variant's next index is often undefined and the action snaps
//! back: the loop turns on and off rather than converging.
//!
//! **`delay`** (the thesis's own suggestion, "delay instead of dropping"):
//! an over-share variant's main-queue packets go to a low band served after
//! every other main-queue packet, an under-share variant's to the priority
//! band. Nothing is dropped by the feedback, so the index stays defined. The
//! loop acts on each variant's index relative to the window's mean index
//! over the variants (the caller divides): J(V, V') depends only on the
//! indices' ratios, while their common level is set by the measuring
//! queues' own service (`C_p` packets, served first with probability `p`),
//! which with the thesis's sizes puts every variant's `i` at 2-8. The action
//! follows a smoothed relative index
//!
//! ```text
//! s <- s + smoothing * (i - s)        (each window with an index; s = i at first)
//! ```
//!
//! with hysteresis: the variant is delayed from `s > upper` until `s <= 1`
//! and prioritised from `s < lower` until `s >= 1`, where the fair share is.
//! A window without an index keeps `s` and the action.

use crate::qdisc::ConfigError;

/// The action on a variant's main-queue packets during a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Feedback {
    /// No action.
    #[default]
    Normal,
    /// Drop its main-queue packets (`drop` mode, `i > upper`).
    Drop,
    /// Serve its main-queue packets after all others (`delay` mode).
    Delay,
    /// Serve its main-queue packets before all others (`i < lower`).
    Priority,
}

/// How the loop acts on an over-share variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FeedbackMode {
    /// Drop its main-queue packets for a window (the thesis).
    #[default]
    Drop,
    /// Queue them behind every other main-queue packet, with a smoothed
    /// index and hysteresis.
    Delay,
}

impl FeedbackMode {
    /// Parse `"drop"` or `"delay"`.
    pub fn parse(s: &str) -> Result<FeedbackMode, String> {
        match s {
            "drop" => Ok(FeedbackMode::Drop),
            "delay" => Ok(FeedbackMode::Delay),
            _ => Err(format!("{s:?}: give \"drop\" (the thesis) or \"delay\"")),
        }
    }
}

/// The control law's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FeedbackLaw {
    /// How an over-share variant is treated.
    pub mode: FeedbackMode,
    /// Over-share threshold on the index.
    pub upper: f64,
    /// Under-share threshold on the index.
    pub lower: f64,
    /// `delay` mode: weight of the newest window in the smoothed index
    /// (1: no smoothing).
    pub smoothing: f64,
}

/// One variant's loop state.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoopState {
    /// The action in force.
    pub action: Feedback,
    /// `delay` mode: the smoothed index.
    pub smoothed: Option<f64>,
}

impl FeedbackLaw {
    /// Check the parameters (`lower <= 1 <= upper` for the hysteresis).
    pub fn validate(&self, name: &'static str) -> Result<(), ConfigError> {
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(ConfigError::new(
                name,
                "smoothing",
                self.smoothing,
                "(0, 1]",
            ));
        }
        if self.mode == FeedbackMode::Delay && !(self.lower <= 1.0 && self.upper >= 1.0) {
            return Err(ConfigError::new(
                name,
                "upper",
                self.upper,
                format!(
                    "delay mode releases a variant at index 1: give lower <= 1 <= upper (lower = {})",
                    self.lower
                ),
            ));
        }
        Ok(())
    }

    /// The state after a window whose index is `index`.
    pub fn next(&self, state: LoopState, index: Option<f64>) -> LoopState {
        match self.mode {
            FeedbackMode::Drop => LoopState {
                action: match index {
                    Some(i) if i > self.upper => Feedback::Drop,
                    Some(i) if i < self.lower => Feedback::Priority,
                    _ => Feedback::Normal,
                },
                smoothed: index,
            },
            FeedbackMode::Delay => {
                let Some(i) = index else {
                    return state;
                };
                let s = match state.smoothed {
                    Some(s) => s + self.smoothing * (i - s),
                    None => i,
                };
                let action = if s > self.upper {
                    Feedback::Delay
                } else if s < self.lower {
                    Feedback::Priority
                } else if state.action == Feedback::Delay && s > 1.0 {
                    Feedback::Delay
                } else if state.action == Feedback::Priority && s < 1.0 {
                    Feedback::Priority
                } else {
                    Feedback::Normal
                };
                LoopState {
                    action,
                    smoothed: Some(s),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn law(mode: FeedbackMode, smoothing: f64) -> FeedbackLaw {
        FeedbackLaw {
            mode,
            upper: 1.2,
            lower: 0.8,
            smoothing,
        }
    }

    fn run(law: &FeedbackLaw, indices: &[Option<f64>]) -> Vec<Feedback> {
        let mut s = LoopState::default();
        indices
            .iter()
            .map(|&i| {
                s = law.next(s, i);
                s.action
            })
            .collect()
    }

    #[test]
    fn drop_mode_is_the_thesis_rule_window_by_window() {
        let l = law(FeedbackMode::Drop, 1.0);
        assert_eq!(
            run(&l, &[Some(1.3), None, Some(1.1), Some(0.7), Some(1.0)]),
            [
                Feedback::Drop,
                Feedback::Normal, // no index: the action snaps back
                Feedback::Normal,
                Feedback::Priority,
                Feedback::Normal,
            ]
        );
    }

    #[test]
    fn delay_mode_holds_its_action_until_the_index_is_back_at_the_fair_share() {
        let l = law(FeedbackMode::Delay, 1.0);
        // Above 1.2: delayed; between 1 and 1.2 it stays delayed; at 1 or
        // below it is released. A window without an index changes nothing.
        assert_eq!(
            run(
                &l,
                &[Some(1.3), Some(1.1), None, Some(1.05), Some(1.0), Some(1.1)]
            ),
            [
                Feedback::Delay,
                Feedback::Delay,
                Feedback::Delay,
                Feedback::Delay,
                Feedback::Normal,
                Feedback::Normal,
            ]
        );
        assert_eq!(
            run(&l, &[Some(0.7), Some(0.9), Some(1.0), Some(0.9)]),
            [
                Feedback::Priority,
                Feedback::Priority,
                Feedback::Normal,
                Feedback::Normal,
            ]
        );
    }

    #[test]
    fn smoothing_keeps_one_noisy_window_from_acting() {
        let l = law(FeedbackMode::Delay, 0.3);
        // One window at 2.0 among fair ones: s = 1 + 0.3 = 1.3 > 1.2 would
        // act; at 1.5 it is 1.15 and does not.
        assert_eq!(
            run(&l, &[Some(1.0), Some(1.5), Some(1.0)])[1],
            Feedback::Normal
        );
        // A lasting excess does, within a few windows: 1 -> 1.15 -> 1.255.
        assert_eq!(
            run(&l, &[Some(1.0), Some(1.5), Some(1.5)]),
            [Feedback::Normal, Feedback::Normal, Feedback::Delay]
        );
        let s = l.next(LoopState::default(), Some(2.0));
        assert_eq!(s.smoothed, Some(2.0), "the first index is taken as it is");
    }

    #[test]
    fn parameters_are_checked() {
        assert!(law(FeedbackMode::Delay, 0.0).validate("rrmqs").is_err());
        assert!(law(FeedbackMode::Delay, 1.5).validate("rrmqs").is_err());
        let mut l = law(FeedbackMode::Delay, 0.5);
        l.upper = 0.9;
        l.lower = 0.5;
        assert!(l.validate("rrmqs").is_err());
        l.mode = FeedbackMode::Drop;
        assert!(l.validate("rrmqs").is_ok(), "drop mode has no hysteresis");
        assert_eq!(FeedbackMode::parse("delay"), Ok(FeedbackMode::Delay));
        assert!(FeedbackMode::parse("slow").is_err());
    }
}
