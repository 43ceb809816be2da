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
//!
//! **`probability`** (not in the thesis; a loop that takes rate from an
//! over-share variant in proportion to its excess instead of all of it):
//! the variant's main-queue packets are dropped with a probability `p`, an
//! integral of the smoothed relative index's excess in the log domain,
//!
//! ```text
//! e = clamp((s - 1) / (upper - 1), 0, 1)    when s >= 1
//!     clamp((s - 1) / (1 - lower), -1, 0)   when s <  1
//! p <- min(P_MAX, max(p, P_MIN) * 2^e)      when e > 0
//!      p * 2^e, and 0 once below P_MIN      when e <= 0
//! ```
//!
//! so `p` doubles per window at `s >= upper`, halves at `s <= lower` and
//! settles where the variant's index is at the mean. Loss-based senders'
//! rates fall as `p` grows (as `1 / sqrt(p)` for Reno), so the loop has a
//! fixed point at the fair share. A variant with `p = 0` below `lower` is
//! prioritised, as in the other modes.

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
    /// Drop its main-queue packets with the loop's probability
    /// (`probability` mode).
    Thin,
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
    /// Drop a fraction of them that grows with the smoothed index's excess.
    Probability,
}

impl FeedbackMode {
    /// Whether the loop acts on each index relative to the window's mean
    /// index over the variants (`delay`, `probability`) rather than on the
    /// index itself (`drop`, the thesis).
    pub fn relative(self) -> bool {
        self != FeedbackMode::Drop
    }

    /// Parse `"drop"`, `"delay"` or `"probability"`.
    pub fn parse(s: &str) -> Result<FeedbackMode, String> {
        match s {
            "drop" => Ok(FeedbackMode::Drop),
            "delay" => Ok(FeedbackMode::Delay),
            "probability" => Ok(FeedbackMode::Probability),
            _ => Err(format!(
                "{s:?}: give \"drop\" (the thesis), \"delay\" or \"probability\""
            )),
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
    /// `delay` and `probability` modes: weight of the newest window in the
    /// smoothed index
    /// (1: no smoothing).
    pub smoothing: f64,
}

/// One variant's loop state.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoopState {
    /// The action in force.
    pub action: Feedback,
    /// `delay` and `probability` modes: the smoothed index.
    pub smoothed: Option<f64>,
    /// `probability` mode: the drop probability of its main-queue packets.
    pub drop_probability: f64,
}

/// `probability` mode: the smallest drop probability the loop starts from
/// (below it, `p` is 0).
pub const P_MIN: f64 = 1e-4;
/// `probability` mode: the largest drop probability.
pub const P_MAX: f64 = 0.5;

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
        if self.mode == FeedbackMode::Probability && !(self.lower < 1.0 && self.upper > 1.0) {
            return Err(ConfigError::new(
                name,
                "upper",
                self.upper,
                format!(
                    "probability mode scales its steps by the distance to index 1: give lower < 1 < upper (lower = {})",
                    self.lower
                ),
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
                drop_probability: 0.0,
            },
            FeedbackMode::Delay | FeedbackMode::Probability => {
                let Some(i) = index else {
                    return state;
                };
                let s = match state.smoothed {
                    Some(s) => s + self.smoothing * (i - s),
                    None => i,
                };
                let (action, drop_probability) = if self.mode == FeedbackMode::Delay {
                    (self.delay_action(state.action, s), 0.0)
                } else {
                    self.thin(state.drop_probability, s)
                };
                LoopState {
                    action,
                    smoothed: Some(s),
                    drop_probability,
                }
            }
        }
    }

    /// `delay` mode: the action at smoothed index `s`, with hysteresis
    /// around the fair share 1.
    fn delay_action(&self, action: Feedback, s: f64) -> Feedback {
        if s > self.upper || (action == Feedback::Delay && s > 1.0) {
            Feedback::Delay
        } else if s < self.lower || (action == Feedback::Priority && s < 1.0) {
            Feedback::Priority
        } else {
            Feedback::Normal
        }
    }

    /// `probability` mode: the action and drop probability after a window
    /// at smoothed index `s`, from the drop probability `p` in force.
    fn thin(&self, p: f64, s: f64) -> (Feedback, f64) {
        let e = if s >= 1.0 {
            ((s - 1.0) / (self.upper - 1.0)).min(1.0)
        } else {
            ((s - 1.0) / (1.0 - self.lower)).max(-1.0)
        };
        let p = if e > 0.0 {
            (p.max(P_MIN) * e.exp2()).min(P_MAX)
        } else {
            let p = p * e.exp2();
            if p < P_MIN {
                0.0
            } else {
                p
            }
        };
        let action = if p > 0.0 {
            Feedback::Thin
        } else if s < self.lower {
            Feedback::Priority
        } else {
            Feedback::Normal
        };
        (action, p)
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
    fn probability_mode_doubles_and_halves_its_drop_probability_around_the_fair_share() {
        let l = law(FeedbackMode::Probability, 1.0);
        let step = |s: LoopState, i: f64| l.next(s, Some(i));
        // Above `upper`: starts at P_MIN and doubles each window, up to P_MAX.
        let mut s = step(LoopState::default(), 1.5);
        assert_eq!(
            (s.action, s.drop_probability),
            (Feedback::Thin, 2.0 * P_MIN)
        );
        s = step(s, 1.2);
        assert_eq!(s.drop_probability, 4.0 * P_MIN);
        for _ in 0..20 {
            s = step(s, 3.0);
        }
        assert_eq!(s.drop_probability, P_MAX);
        // Between 1 and `upper` it grows by less: 1.1 is half way, 2^0.5.
        let half = step(s, 1.1);
        assert_eq!(half.drop_probability, P_MAX, "capped");
        let mut low = LoopState {
            drop_probability: 0.01,
            ..s
        };
        low = step(low, 1.1);
        assert!((low.drop_probability - 0.01 * 2f64.sqrt()).abs() < 1e-12);
        // At the fair share it holds; below it, it falls, halving at `lower`.
        assert_eq!(step(low, 1.0).drop_probability, low.drop_probability);
        let fell = step(low, 0.9);
        assert!((fell.drop_probability - low.drop_probability / 2f64.sqrt()).abs() < 1e-12);
        assert!((step(low, 0.5).drop_probability - low.drop_probability / 2.0).abs() < 1e-12);
        // Below P_MIN it is 0: normal, or prioritised below `lower`.
        let tiny = LoopState {
            drop_probability: 1.2 * P_MIN,
            ..low
        };
        let off = step(tiny, 0.9);
        assert_eq!((off.action, off.drop_probability), (Feedback::Normal, 0.0));
        assert_eq!(step(off, 0.7).action, Feedback::Priority);
        // A window without an index changes nothing.
        assert_eq!(l.next(low, None), low);
    }

    #[test]
    fn probability_mode_smooths_the_index() {
        let l = law(FeedbackMode::Probability, 0.3);
        // One noisy window at 1.5 among fair ones moves s to 1.15 only.
        let s = l.next(l.next(LoopState::default(), Some(1.0)), Some(1.5));
        assert!((s.smoothed.unwrap() - 1.15).abs() < 1e-12);
        let e: f64 = 0.15 / 0.2;
        assert!((s.drop_probability - P_MIN * e.exp2()).abs() < 1e-15);
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
        let mut p = law(FeedbackMode::Probability, 0.5);
        assert!(p.validate("rrmqs").is_ok());
        p.upper = 1.0;
        assert!(p.validate("rrmqs").is_err(), "no step scale at upper = 1");
        assert_eq!(
            FeedbackMode::parse("probability"),
            Ok(FeedbackMode::Probability)
        );
        assert_eq!(FeedbackMode::parse("delay"), Ok(FeedbackMode::Delay));
        assert!(FeedbackMode::parse("slow").is_err());
    }
}
