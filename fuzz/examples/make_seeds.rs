//! Writes the seed inputs of the binary targets into `corpus/<target>/`
//! (`cargo run --example make_seeds`). The text targets' seeds are copies
//! of the repository's example files; see README.md.

use std::path::{Path, PathBuf};

use tollgate_fuzz::l3::MAX_NEIGHBOURS;
use tollgate_router::packet::{build, FlowKey};
use tollgate_transport::bulk::{Mode, Request};

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join(format!("seed-{name}"));
    std::fs::write(path, data).unwrap();
}

/// Op 0/4 of `router_frames` and 0 of `l3_neighbours`: a raw frame.
fn raw(op: u8, frame: &[u8]) -> Vec<u8> {
    let mut v = vec![op];
    v.extend_from_slice(&(frame.len() as u16).to_be_bytes());
    v.extend_from_slice(frame);
    v
}

fn udp4(src: [u8; 4], dst: [u8; 4], tos: u8, payload: usize) -> Vec<u8> {
    let key = FlowKey::new(src.into(), dst.into(), 17, 4000, 443);
    build::udp4(&key, tos, payload)
}

/// An Ethernet + IPv6 + UDP frame.
fn udp6(hop_limit: u8, dst_last: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 0xa0, 2, 0, 0, 0, 0, 5, 0x86, 0xdd];
    let len = (8 + payload) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[17, hop_limit]);
    f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
    f.extend_from_slice(&[0xfd, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, dst_last]);
    f.extend_from_slice(&[0x0f, 0xa0, 0x01, 0xbb]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend(std::iter::repeat_n(0u8, payload));
    f
}

fn main() {
    // router_frames: per discipline, valid UDP/TCP frames of a few flows,
    // time passing, raw frames (IPv4, IPv6, VLAN-tagged).
    for d in 0..9u8 {
        let mut v = vec![d | (d & 1) << 4 | (d & 2) << 4, 20];
        for i in 0..24u8 {
            // Synthetic: flow, TOS (DSCP variant, ECT(0)), payload, TCP flags.
            v.extend_from_slice(&[1, i % 5, (i % 4) << 2 | 2, 0x05, 0xa0 - i, i % 3]);
            if i % 3 == 0 {
                v.extend_from_slice(&[2, 0x10, 0x00]);
            }
        }
        v.extend_from_slice(&raw(0, &udp4([10, 0, 0, 1], [10, 0, 1, 1], 0x04 | 1, 200)));
        v.extend_from_slice(&raw(4, &udp6(64, 1, 100)));
        let mut vlan = udp4([10, 0, 0, 2], [10, 0, 1, 1], 0, 64);
        vlan.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        v.extend_from_slice(&raw(0x82, &vlan));
        v.extend_from_slice(&[3, 3, 3, 2, 0xff, 0xff]);
        write("router_frames", &format!("discipline-{d}"), &v);
    }

    // l3_neighbours: ARP request and reply, ND solicitation and
    // advertisement, forwarded IPv4 and IPv6, a flood, time passing.
    let mut v = Vec::new();
    v.extend_from_slice(&[1, 2, 0, 0, 0, 0, 5, 10, 0, 0, 5, 10, 0, 0, 1]);
    v.extend_from_slice(&[2, 2, 0, 0, 0, 0, 5, 10, 0, 0, 5, 10, 0, 0, 1]);
    v.extend_from_slice(&[3, 2, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 6, 0]);
    v.extend_from_slice(&[15, 2, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 6, 0]);
    v.extend_from_slice(&raw(0, &udp4([10, 0, 0, 5], [172, 16, 0, 9], 0, 32)));
    v.extend_from_slice(&raw(0, &udp4([10, 0, 0, 5], [192, 168, 1, 2], 0, 32)));
    v.extend_from_slice(&raw(0, &udp6(64, 9, 16)));
    v.extend_from_slice(&raw(0x84, &udp4([192, 168, 1, 2], [10, 0, 0, 5], 0, 32)));
    write("l3_neighbours", "mixed", &v);
    let mut v = Vec::new();
    v.push(4);
    v.extend_from_slice(&((MAX_NEIGHBOURS as u16) + 10).to_be_bytes());
    v.extend_from_slice(&[0, 0, 1, 0]);
    // 65 us, then 2^31 x 65535 ns: every learned entry expires.
    v.extend_from_slice(&[5, 0xff, 0xff, 0xfb, 0xff, 0xff]);
    v.extend_from_slice(&[4, 0x00, 0x20, 0, 0x10, 0, 0]);
    write("l3_neighbours", "flood", &v);

    // bulk_request: v1 and v2 requests, read 1, 7 and 64 bytes at a time,
    // then an upload reply.
    let down = Request {
        mode: Mode::Download,
        size: Some(1 << 20),
        duration: None,
    };
    let up = Request {
        mode: Mode::Upload,
        size: None,
        duration: Some(std::time::Duration::from_secs(10)),
    };
    let mut v = vec![0];
    v.extend_from_slice(&down.encode());
    write("bulk_request", "v1-download", &v);
    let mut v = vec![6];
    v.extend_from_slice(&up.encode_v2(None).unwrap());
    v.push(0xff);
    v.extend_from_slice(&(1u64 << 20).to_be_bytes());
    v.extend_from_slice(&(2u64 << 20).to_be_bytes());
    write("bulk_request", "v2-upload-reply", &v);
    let mut v = vec![63];
    v.extend_from_slice(&down.encode_v2(Some("taxed(cubic, tau=0.02)")).unwrap());
    write("bulk_request", "v2-download-cca", &v);

    // quic_endpoint (ops: 0 deliver + TOS byte, 1 drop, 2 cut, 3 flip,
    // 4 replay, 5 garbage, 6 server to client, 7 another client, 8 time):
    // a clean handshake and request; one with loss, a cut and a flipped
    // datagram, a replay, garbage and a second client.
    let round = [0, 0, 6, 8, 0x03, 0xe8];
    write("quic_endpoint", "handshake", &round.repeat(12));
    let mut v = vec![1, 0, 0, 6, 8, 0x03, 0xe8];
    v.extend_from_slice(&[2, 0x00, 0x40, 0, 3, 0x00, 0x20, 0x55, 0, 4, 0, 1, 0]);
    v.extend_from_slice(&[5, 0x00, 0x30, 7]);
    v.extend(std::iter::repeat_n(0x5a, 48));
    v.extend_from_slice(&[0, 7]);
    v.extend_from_slice(&round.repeat(6));
    v.extend_from_slice(&[0xf2, 0xff, 0xff, 6]);
    write("quic_endpoint", "lossy", &v);

    // cca_spec: plain names, parameters, nesting.
    for (i, s) in [
        "newreno",
        "cubic",
        "bbr",
        "libra",
        "taxed(cubic, tau=0.02)",
        "cubic(beta=0.7)",
        "vegas(alpha=2, beta=4)",
        "ledbat(target=25ms)",
        "cbr(rate=10Mbit)",
    ]
    .iter()
    .enumerate()
    {
        write("cca_spec", &i.to_string(), s.as_bytes());
    }
}
