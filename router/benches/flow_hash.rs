//! ns per 5-tuple for [`FlowHasher`]'s two constructions in the same run:
//! the IPv4 one (two folded multiplies, what the DPDK fast path computes for
//! every packet of CHOKe, Cebinae, RRMQS and FQ) and the five-word one that
//! IPv6 keys use.
//!
//! `cargo bench -p tollgate-router --bench flow_hash`
//!
//! Each iteration hashes 1,024 distinct UDP 5-tuples and sums the hashes
//! (throughput: the hashes are independent, as for a burst of packets).

use std::hint::black_box;
use std::net::{IpAddr, Ipv6Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tollgate_router::flow::{mix64, FlowHasher};
use tollgate_router::packet::FlowKey;

const N: usize = 1024;

fn bench(c: &mut Criterion) {
    let h = FlowHasher::new(7);
    let tuples: Vec<([u8; 4], [u8; 4], u16, u16)> = (0..N as u64)
        .map(|i| {
            let r = mix64(i).to_le_bytes();
            (
                [10, r[0], r[1], r[2]],
                [10, 9, 0, 1],
                u16::from_le_bytes([r[3], r[4]]),
                443,
            )
        })
        .collect();
    let v6: Vec<FlowKey> = tuples
        .iter()
        .map(|&(s, d, sp, dp)| {
            let a = |b: [u8; 4]| {
                IpAddr::V6(Ipv6Addr::new(
                    0x2001,
                    0xdb8,
                    0,
                    0,
                    0,
                    0,
                    u16::from_be_bytes([b[0], b[1]]),
                    u16::from_be_bytes([b[2], b[3]]),
                ))
            };
            FlowKey::new(a(s), a(d), 17, sp, dp)
        })
        .collect();
    let mut g = c.benchmark_group("flow_hash");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("ipv4_two_folds", |b| {
        b.iter(|| {
            tuples.iter().fold(0u64, |acc, &(s, d, sp, dp)| {
                acc.wrapping_add(h.hash_v4(black_box(s), d, 17, sp, dp))
            })
        })
    });
    g.bench_function("five_words", |b| {
        b.iter(|| {
            v6.iter()
                .fold(0u64, |acc, k| acc.wrapping_add(h.hash(black_box(k))))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
