//! ns per ACK for every registered algorithm.
//!
//! Each iteration is one steady-state `on_ack` plus the `on_packet_sent` of the
//! packet that replaces it, in a pipeline with a 20 ms RTT (a few µs of
//! jitter), after a warm-up and a loss that leave the algorithm in congestion
//! avoidance. Wrappers are
//! measured around NewReno. Compare rows as ratios to `newreno` from one run:
//!
//! ```text
//! cargo bench -p tollgate-cca --bench per_ack
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tollgate_cca::registry::ALGORITHMS;
use tollgate_cca::{
    build, Ack, CongestionControl, CongestionEvent, CongestionKind, Env, RttSample, SentPacket,
    Time,
};

struct Sender {
    cca: Box<dyn CongestionControl>,
    now: Time,
    pn: u64,
}

impl Sender {
    /// One step of a steady pipeline with a 20 ms RTT and a packet every
    /// 100 µs: the packet sent 200 steps ago is acknowledged, a new one is
    /// sent. Time only moves forward.
    fn step(&mut self) {
        let mss = 1200;
        let rtt_steps = 200;
        self.now = self.now + Duration::from_micros(100);
        self.pn += 1;
        if self.pn > rtt_steps {
            let jitter = Duration::from_micros(self.pn % 7);
            let acked = self.pn - rtt_steps;
            let ack = Ack {
                packet_number: acked,
                bytes: mss,
                sent_time: self.now - Duration::from_millis(20) - jitter,
                rtt: RttSample {
                    latest: Duration::from_millis(20) + jitter,
                    smoothed: Duration::from_millis(20),
                    min: Duration::from_millis(20),
                },
                app_limited: false,
            };
            self.cca.on_ack(self.now, &ack);
        }
        let sent = SentPacket {
            packet_number: self.pn,
            bytes: mss,
            bytes_in_flight: mss * rtt_steps,
        };
        self.cca.on_packet_sent(self.now, &sent);
    }
}

fn per_ack(c: &mut Criterion) {
    let env = Env::with_mss(1200);
    let mut group = c.benchmark_group("per_ack");
    for algorithm in ALGORITHMS {
        let spec = if algorithm.takes_base {
            format!("{}(newreno)", algorithm.name)
        } else {
            algorithm.name.to_string()
        };
        let mut sender = Sender {
            cca: build(&spec, &env).expect("registered algorithms build"),
            now: Time::ZERO,
            pn: 0,
        };
        for _ in 0..2_000 {
            sender.step();
        }
        let loss = CongestionEvent {
            kind: CongestionKind::Loss,
            sent_time: sender.now,
            lost_bytes: 1200,
            persistent_congestion: false,
        };
        sender.cca.on_congestion_event(sender.now, &loss);
        for _ in 0..2_000 {
            sender.step();
        }
        group.bench_function(spec.as_str(), |b| {
            b.iter(|| {
                sender.step();
                black_box(sender.cca.window())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, per_ack);
criterion_main!(benches);
