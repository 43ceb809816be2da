//! The CCA adapter: any `tollgate-cca` algorithm as a quinn-proto
//! [`congestion::Controller`](quinn_proto::congestion::Controller).
//!
//! One [`CcaHandle`] exists per connection. quinn-proto owns the controller
//! ([`CcaController`]); the [`Endpoint`](crate::Endpoint) keeps a clone of the
//! handle to read the window, pacing rate, statistics and RTT histogram.
//!
//! ## How quinn-proto calls map to the cca trait
//!
//! | quinn-proto | cca trait | notes |
//! |---|---|---|
//! | `ControllerFactory::build(now, mtu)` | `tollgate_cca::build(spec, Env::with_mss(mtu))` | `now` becomes the [`Time`] epoch of the connection |
//! | `on_sent(now, bytes, pn)` | `on_packet_sent` | one call per *datagram*; `packet_number` is an adapter sequence number, see below |
//! | `on_ack(now, sent, bytes, app_limited, rtt)` | `on_ack` | sequence number recovered from `sent` (below); `rtt.latest = now - sent` |
//! | `on_end_acks(now, in_flight, app_limited, largest)` | `on_ack_batch_end` | `largest_acked` is the largest adapter sequence number acked in the batch |
//! | `on_congestion_event(now, sent, persistent, lost)` | `on_congestion_event` | `lost == 0 && !persistent` is ECN-CE, otherwise loss |
//! | `on_ecn(now, ect_ce_increase, ce_increase)` | `on_ecn_counts` | the peer's ECN counts from an ACK frame, before its CE congestion event (a Tollgate patch of quinn-proto, see `transport/vendor/README.md`) |
//! | `ecn_codepoint()` | `l4s()` | ECT(1) for an L4S algorithm (Prague), ECT(0) otherwise (same patch) |
//! | `on_mtu_update(mtu)` | `on_mtu_change` | quinn gives no `now`; the latest time seen is used |
//! | `window()` / `metrics()` | `window()` / `stats()` | pacing rate reported to qlog in bit/s |
//!
//! ### Approximations
//!
//! - **Packet numbers.** quinn-proto's `on_sent` reports the number of the last
//!   packet in a datagram (in whichever packet-number space it belongs to) and
//!   `on_ack` reports no packet number at all, only the send time. The adapter
//!   therefore numbers datagrams itself (0, 1, 2, …; strictly increasing and
//!   consecutive for back-to-back datagrams, which is what CapProbe's pair
//!   detection wants) and remembers `(send time, number)` in a bounded queue.
//!   An ACK is matched to the oldest not-yet-acked datagram with exactly that
//!   send time. Datagrams sent with one `now` share a send time; quinn-proto
//!   acknowledges them in ascending order, so the match is exact except when
//!   ACKs for the same burst arrive reordered (then two numbers of the burst
//!   swap) or the entry was already evicted (counted in
//!   [`CcaSnapshot::unmatched_acks`]; the ACK then carries the newest number).
//! - **Bytes in flight** in [`SentPacket`] is the adapter's running estimate
//!   (reset to quinn-proto's exact value at every ACK batch); it includes ACK-only
//!   datagrams between batches, which quinn-proto does not count.
//! - `on_packet_sent` is called for every datagram, including the rare ACK-only
//!   ones a bulk sender emits, because quinn-proto does not say which it is.
//! - **clone_box** (used by quinn-proto on path migration to keep the old path's
//!   controller) returns a controller sharing the same state, so a reverted
//!   migration continues from the current state instead of a snapshot.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::{EcnCodepoint, RttEstimator};
use tollgate_cca::{
    Ack, AckBatch, CongestionControl, CongestionEvent, CongestionKind, Env, RttSample, SentPacket,
    SpecError, Stats, Time, VariantId,
};

/// Maximum number of remembered sent datagrams per connection.
const MAX_SENT_RECORDS: usize = 1 << 16;
/// Unacked records this far (in datagrams) below the largest acked one are
/// treated as lost or late and forgotten.
const REORDER_HORIZON: u64 = 1024;

/// A sent datagram awaiting its ACK.
#[derive(Clone, Copy, Debug)]
struct SentRecord {
    time: Instant,
    seq: u64,
    acked: bool,
}

/// Shared per-connection CCA state: the algorithm plus the adapter's bookkeeping.
#[derive(Debug)]
pub struct CcaCore {
    spec: String,
    cca: Box<dyn CongestionControl>,
    epoch: Option<Instant>,
    last_now: Option<Instant>,
    mss: u64,
    /// The host's link rate, passed to the algorithm's [`Env`].
    link_rate_bps: Option<f64>,
    /// The flow's seed, passed to the algorithm's [`Env`].
    seed: Option<u64>,
    next_seq: u64,
    sent: VecDeque<SentRecord>,
    in_flight: u64,
    batch_largest: Option<u64>,
    rtt_us: Histogram<u64>,
    congestion_events: u64,
    ecn_events: u64,
    ecn_ect_reported: u64,
    ecn_ce_reported: u64,
    lost_bytes: u64,
    acked_bytes: u64,
    unmatched_acks: u64,
    latest_rtt: Option<Duration>,
    smoothed_rtt: Option<Duration>,
}

/// A point-in-time view of a connection's congestion controller.
#[derive(Clone, Debug)]
pub struct CcaSnapshot {
    /// The spec string the algorithm was built from.
    pub spec: String,
    /// Variant id (DSCP codepoint when marking is on).
    pub variant: VariantId,
    /// The algorithm's own statistics (window, ssthresh, pacing rate, details).
    pub stats: Stats,
    /// Bytes in flight as last reported by quinn-proto (plus sends since).
    pub bytes_in_flight: u64,
    /// Congestion events caused by loss.
    pub loss_events: u64,
    /// Congestion events caused by ECN-CE.
    pub ecn_events: u64,
    /// Packets the peer's ACK frames reported received ECN-capable
    /// (ECT(0), ECT(1) or CE), as passed to the algorithm's `on_ecn_counts`.
    pub ecn_ect_reported: u64,
    /// Of those, packets reported CE-marked.
    pub ecn_ce_reported: u64,
    /// Bytes declared lost.
    pub lost_bytes: u64,
    /// Bytes newly acknowledged.
    pub acked_bytes: u64,
    /// ACKs whose datagram number could not be recovered.
    pub unmatched_acks: u64,
    /// Latest per-packet RTT sample (ACK arrival − send time).
    pub latest_rtt: Option<Duration>,
    /// quinn-proto's smoothed RTT at the last ACK.
    pub smoothed_rtt: Option<Duration>,
}

impl CcaCore {
    fn new(
        spec: &str,
        mss: u64,
        link_rate_bps: Option<f64>,
        seed: Option<u64>,
    ) -> Result<Self, SpecError> {
        let env = Env::with_mss(mss)
            .with_link_rate(link_rate_bps)
            .with_seed(seed);
        let cca = tollgate_cca::build(spec, &env)?;
        Ok(CcaCore {
            link_rate_bps,
            seed,
            spec: spec.to_string(),
            cca,
            epoch: None,
            last_now: None,
            mss,
            next_seq: 0,
            sent: VecDeque::new(),
            in_flight: 0,
            batch_largest: None,
            rtt_us: new_rtt_histogram(),
            congestion_events: 0,
            ecn_events: 0,
            ecn_ect_reported: 0,
            ecn_ce_reported: 0,
            lost_bytes: 0,
            acked_bytes: 0,
            unmatched_acks: 0,
            latest_rtt: None,
            smoothed_rtt: None,
        })
    }

    /// `now` as a cca [`Time`] relative to the connection epoch.
    fn time(&mut self, now: Instant) -> Time {
        let epoch = *self.epoch.get_or_insert(now);
        self.last_now = Some(self.last_now.map_or(now, |t| t.max(now)));
        Time::from_nanos(tollgate_cca::time::duration_nanos(
            now.saturating_duration_since(epoch),
        ))
    }

    fn on_sent(&mut self, now: Instant, bytes: u64) {
        let t = self.time(now);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight += bytes;
        if self.sent.len() >= MAX_SENT_RECORDS {
            self.sent.pop_front();
        }
        self.sent.push_back(SentRecord {
            time: now,
            seq,
            acked: false,
        });
        self.cca.on_packet_sent(
            t,
            &SentPacket {
                packet_number: seq,
                bytes,
                bytes_in_flight: self.in_flight,
            },
        );
    }

    /// The sequence number of the oldest unacked datagram sent at `sent`.
    fn match_ack(&mut self, sent: Instant) -> Option<u64> {
        // The first record sent at or after `sent` (records are in send
        // order). ACKs mostly come in send order, so it is usually among the
        // first few: scan those before searching (the search over a deep
        // queue was 2.5 % of an emulator run).
        let near = self.sent.len().min(16);
        let start = match self.sent.range(..near).position(|r| r.time >= sent) {
            Some(i) => i,
            None if near == self.sent.len() => near,
            None => self.sent.partition_point(|r| r.time < sent),
        };
        for i in start..self.sent.len() {
            let r = &mut self.sent[i];
            if r.time != sent {
                break;
            }
            if !r.acked {
                r.acked = true;
                return Some(r.seq);
            }
        }
        None
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        let t = self.time(now);
        let seq = match self.match_ack(sent) {
            Some(seq) => seq,
            None => {
                self.unmatched_acks += 1;
                self.next_seq.saturating_sub(1)
            }
        };
        self.batch_largest = Some(self.batch_largest.map_or(seq, |l| l.max(seq)));
        let latest = now.saturating_duration_since(sent);
        let _ = self.rtt_us.record(latest.as_micros().max(1) as u64);
        self.latest_rtt = Some(latest);
        self.smoothed_rtt = Some(rtt.get());
        self.in_flight = self.in_flight.saturating_sub(bytes);
        self.acked_bytes += bytes;
        let sent_time = self.time(sent);
        self.cca.on_ack(
            t,
            &Ack {
                packet_number: seq,
                bytes,
                sent_time,
                rtt: RttSample {
                    latest,
                    smoothed: rtt.get(),
                    min: rtt.min().min(latest),
                },
                app_limited,
            },
        );
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool) {
        let t = self.time(now);
        self.in_flight = in_flight;
        let largest = self.batch_largest.take();
        if let Some(l) = largest {
            while let Some(front) = self.sent.front() {
                if front.acked || front.seq + REORDER_HORIZON < l {
                    self.sent.pop_front();
                } else {
                    break;
                }
            }
        }
        self.cca.on_ack_batch_end(
            t,
            &AckBatch {
                bytes_in_flight: in_flight,
                app_limited,
                largest_acked: largest,
            },
        );
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, lost: u64) {
        let t = self.time(now);
        let kind = if lost == 0 && !persistent {
            self.ecn_events += 1;
            CongestionKind::EcnCe
        } else {
            self.congestion_events += 1;
            CongestionKind::Loss
        };
        self.lost_bytes += lost;
        self.in_flight = self.in_flight.saturating_sub(lost);
        let before = self.cca.window();
        let sent_time = self.time(sent);
        self.cca.on_congestion_event(
            t,
            &CongestionEvent {
                kind,
                sent_time,
                lost_bytes: lost,
                persistent_congestion: persistent,
            },
        );
        tracing::debug!(
            target: "tollgate_transport::cca",
            cca = %self.spec,
            ?kind,
            lost_bytes = lost,
            persistent,
            window_before = before,
            window_after = self.cca.window(),
            "congestion event"
        );
    }

    fn on_ecn(&mut self, now: Instant, ect_ce_increase: u64, ce_increase: u64) {
        let t = self.time(now);
        self.ecn_ect_reported += ect_ce_increase;
        self.ecn_ce_reported += ce_increase;
        self.cca.on_ecn_counts(t, ect_ce_increase, ce_increase);
    }

    /// The environment the algorithm is built for.
    fn env(&self) -> Env {
        Env::with_mss(self.mss)
            .with_link_rate(self.link_rate_bps)
            .with_seed(self.seed)
    }

    fn on_mtu_update(&mut self, mtu: u16) {
        self.mss = u64::from(mtu);
        let now = self.last_now.or(self.epoch);
        let t = now.map_or(Time::ZERO, |n| self.time(n));
        self.cca.on_mtu_change(t, self.mss);
    }

    /// Rebuild the algorithm (quinn-proto resets congestion state when it
    /// learns the path changed). The epoch is kept so time stays monotone.
    fn reset(&mut self, now: Instant, mtu: u16) {
        self.mss = u64::from(mtu);
        if let Ok(cca) = tollgate_cca::build(&self.spec, &self.env()) {
            self.cca = cca;
        }
        self.sent.clear();
        self.in_flight = 0;
        self.time(now);
    }

    /// Swap the algorithm for a fresh one built from `spec`, keeping the
    /// adapter's bookkeeping (datagram numbers, bytes in flight, counters), so
    /// ACKs of datagrams sent under the old algorithm still match.
    fn replace(&mut self, spec: &str) -> Result<(), SpecError> {
        self.cca = tollgate_cca::build(spec, &self.env())?;
        self.spec = spec.to_string();
        Ok(())
    }

    fn snapshot(&self) -> CcaSnapshot {
        CcaSnapshot {
            spec: self.spec.clone(),
            variant: self.cca.variant(),
            stats: self.cca.stats(),
            bytes_in_flight: self.in_flight,
            loss_events: self.congestion_events,
            ecn_events: self.ecn_events,
            ecn_ect_reported: self.ecn_ect_reported,
            ecn_ce_reported: self.ecn_ce_reported,
            lost_bytes: self.lost_bytes,
            acked_bytes: self.acked_bytes,
            unmatched_acks: self.unmatched_acks,
            latest_rtt: self.latest_rtt,
            smoothed_rtt: self.smoothed_rtt,
        }
    }
}

/// An empty RTT histogram in microseconds (1 µs .. 1 h, 3 significant digits).
pub fn new_rtt_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// A shared handle on one connection's congestion controller.
#[derive(Clone, Debug)]
pub struct CcaHandle(Arc<Mutex<CcaCore>>);

impl CcaHandle {
    /// Build the algorithm for `spec` (validating it) before the connection exists.
    pub fn new(spec: &str) -> Result<Self, SpecError> {
        Self::with_link_rate(spec, None)
    }

    /// Like [`new`](Self::new), for a host whose own link runs at
    /// `link_rate_bps` (the algorithm's [`Env::link_rate_bps`]: CapProbe
    /// rejects capacity estimates above it).
    pub fn with_link_rate(spec: &str, link_rate_bps: Option<f64>) -> Result<Self, SpecError> {
        Self::for_flow(spec, link_rate_bps, None)
    }

    /// Like [`with_link_rate`](Self::with_link_rate), with the flow's own
    /// seed for the algorithm's random draws ([`Env::seed`]).
    pub fn for_flow(
        spec: &str,
        link_rate_bps: Option<f64>,
        seed: Option<u64>,
    ) -> Result<Self, SpecError> {
        let core = CcaCore::new(spec, 1200, link_rate_bps, seed)?;
        Ok(CcaHandle(Arc::new(Mutex::new(core))))
    }

    fn lock(&self) -> MutexGuard<'_, CcaCore> {
        // Only one thread (the endpoint's) ever locks; poisoning can only
        // follow a panic inside an algorithm, and the state is still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The algorithm's variant id.
    pub fn variant(&self) -> VariantId {
        self.lock().cca.variant()
    }

    /// The pacing rate in bytes per second, if the algorithm paces.
    pub fn pacing_rate(&self) -> Option<u64> {
        self.lock().cca.pacing_rate()
    }

    /// The current congestion window, bytes.
    pub fn window(&self) -> u64 {
        self.lock().cca.window()
    }

    /// A snapshot for statistics.
    pub fn snapshot(&self) -> CcaSnapshot {
        self.lock().snapshot()
    }

    /// A copy of the per-packet RTT histogram (microseconds).
    pub fn rtt_histogram(&self) -> Histogram<u64> {
        self.lock().rtt_us.clone()
    }

    /// Replace the algorithm with `spec` on a live connection (a server
    /// switching to the CCA its client asked for before any application data
    /// flows). The new algorithm starts from its initial window; an invalid
    /// spec leaves the old one in place.
    pub fn replace(&self, spec: &str) -> Result<(), SpecError> {
        self.lock().replace(spec)
    }

    /// The quinn-proto factory that hands this handle's controller to a connection.
    pub fn factory(&self) -> Arc<CcaFactory> {
        Arc::new(CcaFactory {
            handle: self.clone(),
        })
    }
}

/// quinn-proto's [`ControllerFactory`] for one connection.
#[derive(Debug)]
pub struct CcaFactory {
    handle: CcaHandle,
}

impl ControllerFactory for CcaFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let initial_window = {
            let mut core = self.handle.lock();
            core.reset(now, current_mtu);
            core.cca.window()
        };
        Box::new(CcaController {
            handle: self.handle.clone(),
            initial_window,
        })
    }
}

/// The controller quinn-proto drives; every call forwards to the shared core.
#[derive(Debug)]
pub struct CcaController {
    handle: CcaHandle,
    initial_window: u64,
}

impl Controller for CcaController {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.handle.lock().on_sent(now, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.handle
            .lock()
            .on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.handle.lock().on_end_acks(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.handle
            .lock()
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_ecn(&mut self, now: Instant, ect_ce_increase: u64, ce_increase: u64) {
        self.handle.lock().on_ecn(now, ect_ce_increase, ce_increase);
    }

    fn ecn_codepoint(&self) -> EcnCodepoint {
        match self.handle.lock().cca.l4s() {
            true => EcnCodepoint::Ect1,
            false => EcnCodepoint::Ect0,
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.handle.lock().on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        self.handle.lock().cca.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        let stats = self.handle.lock().cca.stats();
        let mut m = ControllerMetrics::default();
        m.congestion_window = stats.window;
        m.ssthresh = stats.ssthresh;
        m.pacing_rate = stats.pacing_rate.map(|r| r.saturating_mul(8));
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(CcaController {
            handle: self.handle.clone(),
            initial_window: self.initial_window,
        })
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_are_matched_to_datagram_numbers_by_send_time() {
        let h = CcaHandle::new("newreno").unwrap();
        let base = Instant::now();
        let ctrl = h.factory().build(base, 1200);
        let mut ctrl = ctrl;
        let t1 = base + Duration::from_millis(1);
        let t2 = base + Duration::from_millis(2);
        ctrl.on_sent(t1, 1200, 0);
        ctrl.on_sent(t1, 1200, 1);
        ctrl.on_sent(t2, 1200, 2);
        let mut core = h.lock();
        assert_eq!(core.match_ack(t1), Some(0));
        assert_eq!(core.match_ack(t2), Some(2));
        assert_eq!(core.match_ack(t1), Some(1));
        assert_eq!(core.match_ack(t1), None);
        assert_eq!(core.in_flight, 3600);
    }

    #[test]
    fn bad_spec_is_rejected_up_front() {
        assert!(CcaHandle::new("no-such-cca").is_err());
    }
}
