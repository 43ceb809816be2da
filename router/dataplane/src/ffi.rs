//! Hand-written FFI declarations: the few DPDK 22.11 functions the dataplane
//! calls directly, and the `tg_*` functions of the C shim (`router/csrc/shim.c`)
//! that wrap DPDK's inline functions and its struct-heavy control calls.
//!
//! DPDK structs stay opaque here: the Rust side only holds pointers to
//! `rte_mbuf` / `rte_mempool`, and the shim takes and returns scalars.

use std::ffi::{c_char, c_int, c_uint};

/// Opaque `struct rte_mbuf`.
#[repr(C)]
#[derive(Debug)]
pub struct RteMbuf {
    _private: [u8; 0],
}

/// Opaque `struct rte_mempool`.
#[repr(C)]
#[derive(Debug)]
pub struct RteMempool {
    _private: [u8; 0],
}

/// Opaque `struct rte_ring`.
#[repr(C)]
#[derive(Debug)]
pub struct RteRing {
    _private: [u8; 0],
}

/// `SOCKET_ID_ANY`.
pub const SOCKET_ID_ANY: c_int = -1;
/// `RTE_MBUF_DEFAULT_BUF_SIZE` (2048 bytes of data room + 128 headroom).
pub const RTE_MBUF_DEFAULT_BUF_SIZE: u16 = 2048 + 128;

extern "C" {
    // ---- DPDK (real symbols) ----
    pub fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub fn rte_eal_cleanup() -> c_int;
    pub fn rte_eal_get_runtime_dir() -> *const c_char;
    pub fn rte_strerror(errnum: c_int) -> *const c_char;
    pub fn rte_eth_dev_count_avail() -> u16;
    pub fn rte_eth_dev_is_valid_port(port_id: u16) -> c_int;
    pub fn rte_socket_id() -> c_uint;
    pub fn rte_pktmbuf_pool_create(
        name: *const c_char,
        n: c_uint,
        cache_size: c_uint,
        priv_size: u16,
        data_room_size: u16,
        socket_id: c_int,
    ) -> *mut RteMempool;
    pub fn rte_mempool_free(mp: *mut RteMempool);
    pub fn rte_mempool_avail_count(mp: *const RteMempool) -> c_uint;

    // ---- shim (csrc/shim.c) ----
    pub fn tg_rx_burst(port: u16, queue: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    pub fn tg_tx_burst(port: u16, queue: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    pub fn tg_pktmbuf_free(m: *mut RteMbuf);
    pub fn tg_pktmbuf_free_bulk(ms: *mut *mut RteMbuf, n: c_uint);
    pub fn tg_pktmbuf_alloc_bulk(pool: *mut RteMempool, ms: *mut *mut RteMbuf, n: c_uint) -> c_int;
    pub fn tg_mbuf_data(m: *mut RteMbuf) -> *mut u8;
    pub fn tg_mbuf_data_len(m: *const RteMbuf) -> u16;
    pub fn tg_mbuf_pkt_len(m: *const RteMbuf) -> u32;
    pub fn tg_mbuf_room(m: *const RteMbuf) -> u16;
    pub fn tg_mbuf_set_len(m: *mut RteMbuf, len: u16);
    pub fn tg_mbuf_layout(out: *mut u32);
    pub fn tg_tsc_cycles() -> u64;
    pub fn tg_tsc_hz() -> u64;
    pub fn tg_errno() -> c_int;
    pub fn tg_port_init(
        port: u16,
        nb_q: u16,
        nb_rxd: u16,
        nb_txd: u16,
        pool: *mut RteMempool,
        mac_out: *mut u8,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn tg_port_close(port: u16);
    pub fn tg_port_stats(port: u16, out: *mut u64) -> c_int;
    pub fn tg_link_speed_mbps(port: u16) -> u32;
    pub fn tg_port_name(port: u16, name: *mut c_char, len: usize) -> c_int;
    pub fn tg_ring_create(
        name: *const c_char,
        esize: c_uint,
        count: c_uint,
        socket: c_int,
    ) -> *mut RteRing;
    pub fn tg_ring_free(r: *mut RteRing);
    pub fn tg_ring_enqueue_burst(
        r: *mut RteRing,
        objs: *const std::ffi::c_void,
        esize: c_uint,
        n: c_uint,
    ) -> c_uint;
    pub fn tg_ring_dequeue_burst(
        r: *mut RteRing,
        objs: *mut std::ffi::c_void,
        esize: c_uint,
        n: c_uint,
    ) -> c_uint;
    pub fn tg_ring_count(r: *const RteRing) -> c_uint;
    pub fn tg_lcore_enabled(lcore: c_uint) -> c_int;
    pub fn tg_main_lcore() -> c_uint;
    pub fn tg_lcore_socket(lcore: c_uint) -> c_int;
    pub fn tg_remote_launch(
        f: extern "C" fn(*mut std::ffi::c_void) -> c_int,
        arg: *mut std::ffi::c_void,
        lcore: c_uint,
    ) -> c_int;
    pub fn tg_wait_lcore(lcore: c_uint) -> c_int;
}
