/*
 * Tollgate DPDK shim.
 *
 * DPDK's fast-path API (rte_eth_rx_burst, rte_eth_tx_burst, the mbuf
 * helpers, rte_get_tsc_cycles, rte_errno) consists of `static inline`
 * functions and macros that have no symbol in the shared libraries, so Rust
 * cannot call them directly. This file gives each one a real symbol with a
 * `tg_` prefix. It also wraps the three control-path calls that take large
 * configuration structs (device configure + queue setup + start, statistics,
 * link status) so the Rust side never mirrors a DPDK struct layout: every
 * function here takes and returns only scalars, byte buffers and opaque
 * pointers.
 *
 * Nothing here allocates or keeps state. Compiled by router/build.rs only
 * when the cargo feature `dpdk` is on, against Debian's libdpdk-dev 22.11.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_launch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

/* ---- fast path: bursts ------------------------------------------------ */

uint16_t tg_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t tg_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_tx_burst(port, queue, pkts, n);
}

/* ---- mbufs ------------------------------------------------------------ */

/*
 * The Rust side (src/mbuf.rs) reads these rte_mbuf fields directly at fixed
 * offsets instead of calling a function per field per packet. Checked here at
 * compile time and again by Rust at start-up (tg_mbuf_layout), so a DPDK whose
 * layout differs fails to build or refuses to start instead of misreading.
 */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf.buf_addr moved");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf.data_off moved");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == 20, "rte_mbuf.nb_segs moved");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf.pkt_len moved");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf.data_len moved");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "rte_mbuf.buf_len moved");

/* Offsets of buf_addr, data_off, nb_segs, pkt_len, data_len, buf_len into out[6]. */
void tg_mbuf_layout(uint32_t *out)
{
    out[0] = (uint32_t)offsetof(struct rte_mbuf, buf_addr);
    out[1] = (uint32_t)offsetof(struct rte_mbuf, data_off);
    out[2] = (uint32_t)offsetof(struct rte_mbuf, nb_segs);
    out[3] = (uint32_t)offsetof(struct rte_mbuf, pkt_len);
    out[4] = (uint32_t)offsetof(struct rte_mbuf, data_len);
    out[5] = (uint32_t)offsetof(struct rte_mbuf, buf_len);
}

/* Free a (possibly chained) mbuf back to its pool. NULL is ignored. */
void tg_pktmbuf_free(struct rte_mbuf *m)
{
    rte_pktmbuf_free(m);
}

/* Free `n` mbufs (NULL entries are ignored). */
void tg_pktmbuf_free_bulk(struct rte_mbuf **ms, unsigned int n)
{
    rte_pktmbuf_free_bulk(ms, n);
}

/* Allocate `n` mbufs; 0 on success, negative if the pool cannot supply all. */
int tg_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **ms, unsigned int n)
{
    return rte_pktmbuf_alloc_bulk(pool, ms, n);
}

/* Start of the first segment's data. */
uint8_t *tg_mbuf_data(struct rte_mbuf *m)
{
    return rte_pktmbuf_mtod(m, uint8_t *);
}

/* Bytes in the first segment. */
uint16_t tg_mbuf_data_len(const struct rte_mbuf *m)
{
    return m->data_len;
}

/* Bytes in the whole chain. */
uint32_t tg_mbuf_pkt_len(const struct rte_mbuf *m)
{
    return m->pkt_len;
}

/* Number of segments in the chain. */
uint16_t tg_mbuf_nb_segs(const struct rte_mbuf *m)
{
    return m->nb_segs;
}

/* Room after the data start in the first segment (for writing a frame). */
uint16_t tg_mbuf_room(const struct rte_mbuf *m)
{
    return (uint16_t)(m->buf_len - m->data_off);
}

/* Make a single-segment mbuf hold exactly `len` bytes (len <= tg_mbuf_room). */
void tg_mbuf_set_len(struct rte_mbuf *m, uint16_t len)
{
    m->data_len = len;
    m->pkt_len = len;
}

/* ---- time and errors -------------------------------------------------- */

uint64_t tg_tsc_cycles(void)
{
    return rte_get_tsc_cycles();
}

uint64_t tg_tsc_hz(void)
{
    return rte_get_tsc_hz();
}

/* rte_errno is a per-lcore macro. */
int tg_errno(void)
{
    return rte_errno;
}

/* ---- control path: ports ---------------------------------------------- */

static void set_err(char *err, size_t errlen, const char *what, int rc)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s failed: %s (%d)", what, rte_strerror(rc < 0 ? -rc : rc), rc);
}

/*
 * Configure `port` with `nb_q` RX and TX queues (RSS over IP/TCP/UDP when
 * nb_q > 1 and the device supports it), `nb_rxd`/`nb_txd` descriptors per
 * queue (adjusted to the device's limits), RX buffers from `pool`, then start
 * it and enable promiscuous mode (needed for bump-in-the-wire forwarding).
 * Writes the port MAC to mac_out[6]. Returns 0, or a negative errno with a
 * message in err.
 */
int tg_port_init(uint16_t port, uint16_t nb_q, uint16_t nb_rxd, uint16_t nb_txd,
                 struct rte_mempool *pool, uint8_t *mac_out, char *err, size_t errlen)
{
    struct rte_eth_conf conf;
    struct rte_eth_dev_info info;
    struct rte_ether_addr mac;
    int rc;
    uint16_t q;

    if (!rte_eth_dev_is_valid_port(port)) {
        set_err(err, errlen, "rte_eth_dev_is_valid_port", -ENODEV);
        return -ENODEV;
    }
    memset(&conf, 0, sizeof(conf));
    rc = rte_eth_dev_info_get(port, &info);
    if (rc != 0) {
        set_err(err, errlen, "rte_eth_dev_info_get", rc);
        return rc;
    }
    if (nb_q > info.max_rx_queues || nb_q > info.max_tx_queues) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "port %u supports at most %u RX / %u TX queues, %u requested",
                     port, info.max_rx_queues, info.max_tx_queues, nb_q);
        return -EINVAL;
    }
    if (nb_q > 1) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    }
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    rc = rte_eth_dev_configure(port, nb_q, nb_q, &conf);
    if (rc != 0) {
        set_err(err, errlen, "rte_eth_dev_configure", rc);
        return rc;
    }
    rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nb_rxd, &nb_txd);
    if (rc != 0) {
        set_err(err, errlen, "rte_eth_dev_adjust_nb_rx_tx_desc", rc);
        return rc;
    }
    int socket = rte_eth_dev_socket_id(port);
    if (socket < 0)
        socket = (int)rte_socket_id();
    for (q = 0; q < nb_q; q++) {
        rc = rte_eth_rx_queue_setup(port, q, nb_rxd, (unsigned int)socket, NULL, pool);
        if (rc != 0) {
            set_err(err, errlen, "rte_eth_rx_queue_setup", rc);
            return rc;
        }
        struct rte_eth_txconf txconf = info.default_txconf;
        txconf.offloads = conf.txmode.offloads;
        rc = rte_eth_tx_queue_setup(port, q, nb_txd, (unsigned int)socket, &txconf);
        if (rc != 0) {
            set_err(err, errlen, "rte_eth_tx_queue_setup", rc);
            return rc;
        }
    }
    rc = rte_eth_dev_start(port);
    if (rc != 0) {
        set_err(err, errlen, "rte_eth_dev_start", rc);
        return rc;
    }
    /* Not every virtual device supports promiscuous mode; that is not fatal. */
    (void)rte_eth_promiscuous_enable(port);
    rc = rte_eth_macaddr_get(port, &mac);
    if (rc != 0) {
        set_err(err, errlen, "rte_eth_macaddr_get", rc);
        return rc;
    }
    memcpy(mac_out, mac.addr_bytes, 6);
    return 0;
}

/* Stop and close a port (errors ignored: used at shutdown). */
void tg_port_close(uint16_t port)
{
    (void)rte_eth_dev_stop(port);
    (void)rte_eth_dev_close(port);
}

/*
 * Device counters: out[0..6] = ipackets, opackets, ibytes, obytes, imissed,
 * ierrors, oerrors, rx_nombuf (8 values). Returns 0 or a negative errno.
 */
int tg_port_stats(uint16_t port, uint64_t *out)
{
    struct rte_eth_stats s;
    int rc = rte_eth_stats_get(port, &s);
    if (rc != 0)
        return rc;
    out[0] = s.ipackets;
    out[1] = s.opackets;
    out[2] = s.ibytes;
    out[3] = s.obytes;
    out[4] = s.imissed;
    out[5] = s.ierrors;
    out[6] = s.oerrors;
    out[7] = s.rx_nombuf;
    return 0;
}

/* Link speed in Mbit/s (0 if unknown), without waiting for the link. */
uint32_t tg_link_speed_mbps(uint16_t port)
{
    struct rte_eth_link link;
    memset(&link, 0, sizeof(link));
    if (rte_eth_link_get_nowait(port, &link) != 0)
        return 0;
    if (link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
        return 0;
    return link.link_speed;
}

/* The device name of a port ("net_null0", "0000:01:00.0") into name[len]. */
int tg_port_name(uint16_t port, char *name, size_t len)
{
    char buf[RTE_ETH_NAME_MAX_LEN];
    int rc = rte_eth_dev_get_name_by_port(port, buf);
    if (rc != 0)
        return rc;
    snprintf(name, len, "%s", buf);
    return 0;
}

/* ---- pipeline: rings between lcores ----------------------------------- */

/*
 * A ring of `count` (a power of two) elements of `esize` bytes (a multiple
 * of 4), single producer and single consumer: the pipeline dataplane
 * creates one per (RX worker, egress port) pair, so exactly one lcore
 * enqueues and exactly one dequeues, the cheapest rte_ring mode (no CAS).
 * Elements are copied by value (the Rust packet handle, 24 bytes), so the
 * classification travels with the mbuf pointer. NULL on failure (tg_errno).
 */
struct rte_ring *tg_ring_create(const char *name, unsigned int esize, unsigned int count, int socket)
{
    return rte_ring_create_elem(name, esize, count, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

void tg_ring_free(struct rte_ring *r)
{
    rte_ring_free(r);
}

/* Enqueue up to n elements of esize bytes from objs; returns how many. */
unsigned int tg_ring_enqueue_burst(struct rte_ring *r, const void *objs, unsigned int esize, unsigned int n)
{
    return rte_ring_enqueue_burst_elem(r, objs, esize, n, NULL);
}

/* Dequeue up to n elements of esize bytes into objs; returns how many. */
unsigned int tg_ring_dequeue_burst(struct rte_ring *r, void *objs, unsigned int esize, unsigned int n)
{
    return rte_ring_dequeue_burst_elem(r, objs, esize, n, NULL);
}

/* Elements in the ring (a snapshot: the other side may be moving). */
unsigned int tg_ring_count(const struct rte_ring *r)
{
    return rte_ring_count(r);
}

/* ---- pipeline: lcores --------------------------------------------------- */

/* Whether `lcore` is one of the EAL's lcores (-l / -c). */
int tg_lcore_enabled(unsigned int lcore)
{
    return lcore < RTE_MAX_LCORE && rte_lcore_is_enabled(lcore);
}

unsigned int tg_main_lcore(void)
{
    return rte_get_main_lcore();
}

/* Socket (NUMA node) of an lcore, for its rings. */
int tg_lcore_socket(unsigned int lcore)
{
    return (int)rte_lcore_to_socket_id(lcore);
}

/* Run f(arg) on worker lcore `lcore` (not the main lcore); 0 or a negative errno. */
int tg_remote_launch(int (*f)(void *), void *arg, unsigned int lcore)
{
    return rte_eal_remote_launch(f, arg, lcore);
}

/* Wait until `lcore` finished its function; returns the function's value. */
int tg_wait_lcore(unsigned int lcore)
{
    return rte_eal_wait_lcore(lcore);
}
