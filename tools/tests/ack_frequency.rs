//! A lost ACK_FREQUENCY frame is sent again: the emulator's fault injection
//! (`TOLLGATE_DROP_FIRST_ACK_FREQUENCY`, see `tollgate_tools::sim::host`)
//! drops the datagram carrying a flow's first ACK_FREQUENCY frame, and the
//! receiver must still end up ACKing every packet, as the sender asked.
//! quinn-proto 0.11.19 as released never sends that frame again; Tollgate
//! builds a patched copy (transport/vendor/README.md).
//!
//! One flow, 3 s of virtual time at 20 Mbit/s (about 3,000 datagrams): well
//! under a second in the test build.
//! The variable is process-wide, so this file (its own test binary) sets it
//! for its one in-process run and tests a bad value through the binary.

use std::process::Command;
use std::sync::atomic::AtomicBool;

use tollgate_tools::scenario::parse_plan;
use tollgate_tools::sim;

const VAR: &str = "TOLLGATE_DROP_FIRST_ACK_FREQUENCY";

/// One NewReno flow whose sender asks for an ACK per packet
/// (ACK_FREQUENCY with an ack-eliciting threshold of 0).
const SCENARIO: &str = r#"
name = "lost-ack-frequency"
duration = "3s"
seed = 3
[topology]
kind = "dumbbell"
bottleneck = { rate = "20Mbit", delay = "2ms", buffer = "1bdp" }
[[flows]]
cca = "newreno"
rtt = "20ms"
prompt_acks = "always"
"#;

#[test]
fn a_lost_ack_frequency_frame_is_sent_again() {
    let plan = parse_plan(SCENARIO).expect("scenario is valid");
    std::env::set_var(VAR, "0");
    let data = sim::run(&plan.runs[0], &mut |_| {}, &AtomicBool::new(false));
    std::env::remove_var(VAR);
    let data = data.expect("simulation runs");
    let f = &data.flows[0];
    assert_eq!(f.error, None);
    assert_eq!(
        f.injected_drops, 1,
        "the first ACK_FREQUENCY datagram is dropped"
    );
    let sender = &f.report.as_ref().expect("sender report").quic;
    let receiver = &f.receiver_report.as_ref().expect("receiver report").quic;
    assert!(
        sender.frame_tx.ack_frequency >= 2,
        "the lost ACK_FREQUENCY frame was not sent again (sender's ACK_FREQUENCY frames: {})",
        sender.frame_tx.ack_frequency
    );
    assert!(
        receiver.frame_rx.ack_frequency >= 1,
        "the receiver got no ACK_FREQUENCY frame"
    );
    // With the frame applied the receiver ACKs every packet (threshold 0);
    // with quinn's default threshold it would ACK every other one (~0.5).
    // The frame is resent within a few RTTs, so the whole run's ratio shows it.
    let packets = receiver.udp_rx.datagrams;
    assert!(
        packets > 1000,
        "too little traffic to judge: {packets} datagrams"
    );
    let ratio = receiver.frame_tx.acks as f64 / packets as f64;
    assert!(
        ratio > 0.8,
        "the receiver sent {} ACK frames for {packets} datagrams ({ratio:.2} per datagram): \
         it did not apply the requested ACK frequency",
        receiver.frame_tx.acks
    );
}

#[test]
fn a_bad_flow_index_names_the_variable() {
    let dir = std::env::temp_dir().join(format!("tollgate-af-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let out = dir.join("results");
    for (value, why) in [("1", "no such flow"), ("x", "not a flow index")] {
        let o = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args([
                "sim",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .env(VAR, value)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{VAR}={value} accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(VAR) && err.contains(why), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
