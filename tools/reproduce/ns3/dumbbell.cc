// Independent cross-check of Tollgate's drop-tail dumbbell in ns-3 3.37.
// N TCP NewReno flows (default 2, RTT 10 ms and 100 ms), sender access links
// 1 Gbit/s carrying the flow's delay (rtt/2 - bottleneck delay), bottleneck
// 100 Mbit/s 2 ms with a drop-tail device queue of BUF packets (no queue
// disc), receivers on 1 Gbit/s zero-delay links. Prints per-flow drops at the
// bottleneck and goodput after --from seconds. Arguments: --buf=PKTS
// --duration=S --from=S --delack=1|2 --recovery=prr|classic --pacing=0|1
// --run=N --rttShort=MS --rttLong=MS --jitterUs=J (random extra delay in
// [0, J] µs per packet on the access links, FIFO per direction, seeded by
// --run; 0 = exact timing).
// N flows: --rtts=MS,MS,... (one RTT per flow; replaces rttShort/rttLong)
// with --bottleneckDelay=MS (default 2) and --bottleneckMbps=R (default 100);
// the output is then one line per flow and a summary line
// ("total_mbps=... jfi=...") instead of the 2-flow table row.
// --starts=S,S,... starts flow i's sender at the i-th time, seconds
// (default: every flow at 0; missing entries are 0).
// --tax=TAU (default 0: plain NewReno) makes every sender the taxation
// poster's "option 6" as algorithms.md section 2 describes the authors'
// code: after NewReno's increase (ns-3's, one segment per ACK in slow
// start), if the window grew on this ACK, cwnd = cwnd_new - TAU * cwnd_new,
// slow start included, with no congestion detector.
// --startJitter=S adds to each flow's start a uniform random [0, S) s
// (seeded by --run; Tollgate's `start = "0s..1s"` is --startJitter=1).
// --cca=libra (or libra in --ccas) runs TCP Libra with the window rule of
// Tollgate's `libra` (class TcpLibra below); --libraCapMbps=C is its
// capacity (default 100, configured: there is no CapProbe here);
// --libraHandshakeRtt=0 leaves the handshake's RTT sample out of its Tmin.
// --timestamps=0 turns the TCP timestamp option off (ns-3 then takes RTT
// samples from send times, exact, instead of 1-ms timestamps).
// Per-flow lines of Libra flows add recoveries and timeouts (whole run and
// from --from on), the RTT range and the mean penalty.
// --cca=cubic runs ns-3's TcpCubic (its defaults, HyStart included) instead
// of NewReno, with or without --tax; --hystart=0 turns HyStart off and
// --hystart=delay keeps only its delay-increase test (HyStartDetect=DELAY,
// no ACK-train test: what Tollgate's `cubic(hystart=on)` implements).
// --ccas=A,B,... gives flow i its own CCA (newreno, linuxreno, highspeed or
// cubic; the hetero-buffer cross-check), overriding --cca for those flows.
// ns-3's TcpNewReno grows by one segment per RTT only with an ACK per
// segment: it adds MSS^2/cwnd per ACK, so with delayed ACKs (--delack=2) it
// grows half as fast. linuxreno is ns-3's TcpLinuxReno, which counts the
// segments each ACK covers (as Linux, RFC 3465 and Tollgate's newreno do).
// --red=MIN,MAX puts a RED queue disc of BUF packets on the bottleneck
// (Tollgate's RED defaults: max_p 0.1, weight 0.002, gentle, mean packet
// 1,000 bytes for the idle decay, thresholds
// in packets) in place of the drop-tail device queue; the device queue
// then holds 1 packet.
// --fqcodel=1 puts ns-3's FqCoDelQueueDisc on the bottleneck in the same way
// (device queue 1 packet): limit BUF packets over all flow queues, CoDel
// target 5 ms and interval 100 ms on each queue, 1024 flow queues, quantum
// 1514 bytes (ns-3 3.37 has no attribute for it: SetQuantum; its default
// would be the device MTU, 1500), flows hashed on the 5-tuple (no packet
// filter, perturbation 0). Tollgate's FQ-CoDel marks ECN-capable packets;
// here the TCP flows do not negotiate ECN (ns-3's default) and the flood is
// not ECN-capable, so CoDel drops where Tollgate would mark. ns-3's
// overlimit drop takes up to 64 packets (DropBatchSize) or half the bytes
// from the head of the fattest queue, as Linux does. The summary line then
// adds qdelay_p50_ms and qdelay_p99_ms, the median and 99th percentile of
// the sojourn time in the queue disc of the packets it forwards after --from
// (packets it drops left out; the 1-packet device queue not included), and
// a warning goes to stderr if two flows share a flow queue. NS3DBG=1 also
// prints each sender's sojourn percentiles.
// --floodMbps=R (default 0: none) adds an unresponsive UDP flood: its own
// sender node and access link (delay --floodRtt/2 - bottleneck delay,
// --floodRtt=MS default 20; --jitterUs applies) and receiver, a constant-rate source (ns-3's
// OnOffApplication always on) of 1472-byte payloads, 1500-byte IP packets
// at R Mbit/s counted in IP bytes, from --floodStart=S (default 1) to the
// end, to a PacketSink; losses are ignored. With --rtts its line is
// `flow=flood` (goodput: UDP payload after --from; drops at the bottleneck
// after --from) and the summary line adds tcp_share, the TCP flows'
// goodput over the TCP flows' plus the flood's; total_mbps and jfi stay
// the TCP flows' only.
// With --rtts the per-flow lines give the flow's CCA; with --backlog=1 as
// well the summary line also gives the bottleneck's mean backlog after
// --from (qlen_mean_pkts, sampled every ms, device queue plus queue disc;
// off by default, so that scripts/bench-emulator times ns-3 without the
// sampling events).
// --trace=FILE writes, from --from on, one line per event: `X,t_ns,flow` a
// packet of the flow dropped at the bottleneck; `C,t_ns,flow,cwnd_bytes` the
// sender's window, sampled every 100 ms (tools/reproduce/loss-events.py reads
// it beside Tollgate's TOLLGATE_TRACE).
// The Cebinae artifact's dumbbell (eniac/Cebinae, ns/cebinae/dumbbell_long):
// --accessMbps=R (default 1000) sets every access link's rate, senders' and
// receivers'; --leafSplit=1 puts half of each flow's access delay on its
// sender's link and half on its receiver's (the artifact's leaf links; by
// default the sender's link carries it all); --mss=B (default 1448) is the
// segment size (the artifact's 1440); --fifo=N puts ns-3's FifoQueueDisc of
// N packets in front of the bottleneck's device queue of --buf packets (the
// artifact: --fifo=250 --buf=100); --from2=S adds a second measurement from S
// s to the end (goodput2_mbps per flow, jfi2 in the summary; the artifact
// measures from 1 s, the start of its flows, to 100 s).
// --cebinae=DT_MS,L_US,P,TAU,DPORT,DFLOW,PERQ puts the artifact's Cebinae
// on the bottleneck (class CebinaeQd below; --cebinaeBookkeeping=both
// installs new rates on both queues at once); --minRto=S sets TCP's minimum
// retransmission timeout (ns-3's default, and the artifact's, is 1 s).
// NS3DBG=1 prints queue samples, window reductions of flow 0 and drop points.
//
// Drops: with no queue disc on the bottleneck device and the device queue
// full, ns-3 3.37 drops in the traffic-control layer ("TcDrop"), not in the
// device queue, so both traces are counted.
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <vector>

using namespace ns3;

static double g_from = 60;
static double g_from2 = -1;          // --from2: a second measurement window
static double g_accessMbps = 1000;   // --accessMbps

// A point-to-point channel whose deliveries get an extra random delay uniform
// in [0, jitter], FIFO per direction (Tollgate's host jitter, placed on the
// access links; ns-3 has no per-packet timing noise of its own).
class JitterChannel : public PointToPointChannel
{
  public:
    int64_t jitterNs = 0;
    Ptr<UniformRandomVariable> u = CreateObject<UniformRandomVariable>();
    Time last[2];

    bool TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime) override
    {
        uint32_t wire = src == GetPointToPointDevice(0) ? 0 : 1;
        Ptr<PointToPointNetDevice> dst = GetPointToPointDevice(1 - wire);
        Time now = Simulator::Now();
        Time at = now + txTime + GetDelay() + NanoSeconds(u->GetInteger(0, jitterNs));
        if (at < last[wire])
            at = last[wire];
        last[wire] = at;
        Simulator::ScheduleWithContext(dst->GetNode()->GetId(), at - now,
                                       &PointToPointNetDevice::Receive, dst, p->Copy());
        return true;
    }
};

// An access link: plain point-to-point, or with jitter.
static NetDeviceContainer
AccessLink(Ptr<Node> a, Ptr<Node> b, Time delay, int64_t jitterNs)
{
    if (jitterNs == 0)
    {
        PointToPointHelper acc;
        acc.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(g_accessMbps * 1e6))));
        acc.SetChannelAttribute("Delay", TimeValue(delay));
        return acc.Install(a, b);
    }
    Ptr<JitterChannel> ch = CreateObject<JitterChannel>();
    ch->SetAttribute("Delay", TimeValue(delay));
    ch->jitterNs = jitterNs;
    NetDeviceContainer c;
    for (Ptr<Node> n : {a, b})
    {
        Ptr<PointToPointNetDevice> dev = CreateObject<PointToPointNetDevice>();
        dev->SetAddress(Mac48Address::Allocate());
        dev->SetDataRate(DataRate(uint64_t(g_accessMbps * 1e6)));
        n->AddDevice(dev);
        Ptr<DropTailQueue<Packet>> q = CreateObject<DropTailQueue<Packet>>();
        q->SetMaxSize(QueueSize("100000p"));
        dev->SetQueue(q);
        dev->Attach(ch);
        c.Add(dev);
    }
    return c;
}
// The poster's "option 6" tax over a base CCA, ns-3's NewReno or CUBIC (--tax, --cca).
static double g_tax = 0;
template <class Base>
class Taxed : public Base
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId(("ns3::TollgateTaxed" + Base::GetTypeId().GetName().substr(5)).c_str())
                                .template SetParent<Base>()
                                .template AddConstructor<Taxed<Base>>();
        return tid;
    }
    Taxed() = default;
    Taxed(const Taxed& o) = default;
    std::string GetName() const override { return "Taxed" + Base::GetName(); }
    Ptr<TcpCongestionOps> Fork() override { return CopyObject<Taxed<Base>>(this); }
    void IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        uint32_t before = tcb->m_cWnd;
        Base::IncreaseWindow(tcb, segmentsAcked);
        uint32_t grown = tcb->m_cWnd;
        if (grown > before)
            tcb->m_cWnd = uint32_t(grown - g_tax * grown);
    }
};

// TCP Libra (Marfia, Palazzi, Pau, Gerla, Sanadidi, Roccetti, "TCP Libra:
// Exploring RTT-Fairness for TCP", section 2), exactly the window rule of
// Tollgate's `libra` (cca/src/libra.rs), for --cca=libra / --ccas=...,libra.
// Window w in packets, T the latest RTT sample in seconds:
//   slow start as NewReno, counting the segments each ACK covers (TcpLinuxReno);
//   congestion avoidance, per ACKed segment (paper section 2, first rule):
//     w += (1/w) * alpha * T^2 / (T + T0)
//     alpha = S * P,  S = k1 * C  (eq. 1, C in Mbit/s)
//     P = exp(-k2 (T - Tmin) / (Tmax - Tmin))  (1 while Tmax == Tmin; Tmin,
//         Tmax the smallest and largest RTT samples of the connection)
//   on a congestion event (once per recovery; ns-3 calls GetSsThresh there):
//     w = w * T1 / (2 (T + T0)),  ssthresh = w  (Tollgate's reading of the
//     paper's decrease; its fluid model removes w - T1 w / (2 (T + T0)))
//   T0 = T1 = 1 s, k1 = k2 = 2 (the paper's simulation values).
// The growth is fractional: the part below one byte is carried, as in the
// Rust code. C is --libraCapMbps (the capacity configured; Tollgate's
// `libra(capacity=100Mbit)`). ns-3 hands PktsAcked its RTT estimate
// (m_lastRtt = RttEstimator::GetEstimate), so the program sets the
// estimator's gain to 1 when a flow runs Libra: the estimate is then the
// latest sample. With TCP timestamps (ns-3's default) samples have 1 ms
// granularity; --timestamps=0 gives exact samples from the send times.

// --cebinae=DT_MS,L_US,P,TAU,DPORT,DFLOW,PERQ: Cebinae (Yu et al., SIGCOMM
// '22) on the bottleneck, written after the artifact's ns-3 queue disc
// (eniac/Cebinae, CebinaeQueueDisc): two drop-tail queues of PERQ packets
// (head and tail) in front of the device queue of --buf packets, roles
// swapped every DT; RECONFIG at DT - L gives priority to the next head and,
// every P rounds, finds the port saturated if it dequeued more than
// (1 - DPORT) of the line's bytes, then taxes the flows within DFLOW of the
// largest (top) to (1 - TAU) of their bytes; the other flows get the rest.
// Each class (top, bot) has one byte counter: an arrival goes to the head
// queue while the counter is within the head's rate x DT, to the tail while
// within both rates x DT, else it is dropped; every arrival, dropped or
// not, then sets it to max(counter, head rate x t) + size. ROTATE subtracts
// the head's rate x DT. As in the artifact, ROTATE writes the rates computed
// at the last RECONFIG only into the queue that becomes the tail (the new
// head keeps the rates it had), and an unsaturated evaluation sets the top
// rate to 0, so the top counter is not drained while no flow is top.
// --cebinaeBookkeeping=both installs the computed rates on both queues at
// ROTATE, gives the top class the line rate while no flow is top and counts
// admitted packets only (Tollgate's router/src/cebinae.rs counts admitted
// packets only too, but installs rates as the artifact does).
// Flows are told apart by source address; the summary line adds the
// evaluations, saturated ones, LBF drops and tail-queue arrivals.
class CebinaeQd : public QueueDisc
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("TgCebinaeQd").SetParent<QueueDisc>().SetGroupName("TrafficControl")
                                .AddConstructor<CebinaeQd>();
        return tid;
    }
    CebinaeQd()
        : QueueDisc(QueueDiscSizePolicy::MULTIPLE_QUEUES)
    {
    }
    double line = 100e6; // bit/s
    Time dt = MilliSeconds(12), l = MicroSeconds(10);
    uint32_t p = 1, perQueue = 100;
    double tau = 0.01, dPort = 0.01, dFlow = 0.01;
    bool tollgate = false;
    uint64_t evals = 0, saturated = 0, lbfDrops = 0, tailArrivals = 0;

    void Start()
    {
        for (int q = 0; q < 2; q++)
        {
            rateTop[q] = tollgate ? line : 0;
            rateBot[q] = line;
        }
        compTop = rateTop[0];
        compBot = line;
        Simulator::Schedule(dt - l, &CebinaeQd::Reconfig, this);
    }

  private:
    int head = 0, prio = 0;
    double rateTop[2] = {0, 0}, rateBot[2] = {0, 0}; // bit/s, per queue
    double compTop = 0, compBot = 0, lastTop = 0, lastBot = 0;
    double bytesTop = 0, bytesBot = 0;
    Time base;
    uint32_t rounds = 0;
    uint64_t portBytes = 0;
    std::map<uint32_t, uint64_t> flowBytes;
    std::set<uint32_t> top;

    static uint32_t Src(Ptr<const QueueDiscItem> item)
    {
        Ptr<const Ipv4QueueDiscItem> ip = DynamicCast<const Ipv4QueueDiscItem>(item);
        return ip ? ip->GetHeader().GetSource().Get() : 0;
    }

    void Reconfig()
    {
        prio = 1 - head;
        if (++rounds % p == 0)
        {
            rounds = 0;
            evals++;
            double window = p * dt.GetSeconds();
            top.clear();
            if (portBytes * 8.0 > line * window * (1 - dPort))
            {
                saturated++;
                uint64_t max = 0, sum = 0;
                for (auto& [f, b] : flowBytes)
                    max = std::max(max, b);
                for (auto& [f, b] : flowBytes)
                    if (b > max * (1 - dFlow))
                    {
                        top.insert(f);
                        sum += b;
                    }
                compTop = std::min(sum * (1 - tau) * 8 / window, line * (1 - tau));
                compBot = line - compTop;
            }
            else
            {
                compTop = tollgate ? line : 0;
                compBot = line;
            }
            flowBytes.clear();
            portBytes = 0;
        }
        lastTop = rateTop[head];
        lastBot = rateBot[head];
        Simulator::Schedule(l, &CebinaeQd::Rotate, this);
    }

    void Rotate()
    {
        if (tollgate)
            for (int q = 0; q < 2; q++)
            {
                rateTop[q] = compTop;
                rateBot[q] = compBot;
            }
        else
        {
            rateTop[head] = compTop; // the queue that becomes the tail
            rateBot[head] = compBot;
        }
        bytesTop = std::max(0.0, bytesTop - lastTop * dt.GetSeconds() / 8);
        bytesBot = std::max(0.0, bytesBot - lastBot * dt.GetSeconds() / 8);
        base += dt;
        head = 1 - head;
        Simulator::Schedule(dt - l, &CebinaeQd::Reconfig, this);
    }

    bool DoEnqueue(Ptr<QueueDiscItem> item) override
    {
        bool isTop = top.count(Src(item)) > 0;
        double* rate = isTop ? rateTop : rateBot;
        double& bytes = isTop ? bytesTop : bytesBot;
        double t = (Simulator::Now() - base).GetSeconds(), d = dt.GetSeconds();
        double entitled = t < d ? rate[head] * t / 8 : (rate[head] * d + rate[1 - head] * (t - d)) / 8;
        double headBudget = rate[head] * d / 8, tailBudget = rate[1 - head] * d / 8;
        int q = bytes <= headBudget ? head : bytes <= headBudget + tailBudget ? 1 - head : -1;
        double next = std::max(bytes, entitled) + item->GetSize();
        if (!tollgate)
            bytes = next;
        if (q < 0)
        {
            lbfDrops++;
            DropBeforeEnqueue(item, "LBF");
            return false;
        }
        tailArrivals += q != head;
        if (GetInternalQueue(q)->GetNPackets() >= perQueue)
        {
            DropBeforeEnqueue(item, "Full");
            return false;
        }
        bool ok = GetInternalQueue(q)->Enqueue(item);
        if (ok && tollgate)
            bytes = next;
        return ok;
    }

    Ptr<QueueDiscItem> DoDequeue() override
    {
        Ptr<QueueDiscItem> item = GetInternalQueue(prio)->Dequeue();
        if (!item)
            item = GetInternalQueue(1 - prio)->Dequeue();
        if (item)
        {
            portBytes += item->GetSize();
            flowBytes[Src(item)] += item->GetSize();
        }
        return item;
    }

    bool CheckConfig() override
    {
        if (GetNInternalQueues() == 0)
            for (int q = 0; q < 2; q++)
                AddInternalQueue(CreateObjectWithAttributes<DropTailQueue<QueueDiscItem>>(
                    "MaxSize", QueueSizeValue(QueueSize(std::to_string(perQueue + 1) + "p"))));
        return GetNInternalQueues() == 2;
    }

    void InitializeParams() override
    {
    }
};

static double g_libraCapMbps = 100;
static bool g_libraHandshakeRtt = true; // --libraHandshakeRtt
class TcpLibra : public TcpCongestionOps
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::TollgateTcpLibra")
                                .SetParent<TcpCongestionOps>()
                                .AddConstructor<TcpLibra>();
        return tid;
    }
    TcpLibra() = default;
    TcpLibra(const TcpLibra& o) = default;
    std::string GetName() const override { return "TcpLibra"; }
    Ptr<TcpCongestionOps> Fork() override { return CopyObject<TcpLibra>(this); }

    static constexpr double T0 = 1, T1 = 1, K1 = 2, K2 = 2;
    double growthCarry = 0; // bytes not yet added to the window
    double lastRtt = 0;     // T, seconds (0 until the first sample)
    double tMin = 0, tMax = 0;
    // Diagnostics, printed per flow at the end: recoveries and timeouts over
    // the whole run and from --from on.
    uint64_t events = 0, rtos = 0, eventsFrom = 0, rtosFrom = 0;
    double pSum = 0;
    uint64_t pN = 0;

    double Penalty() const
    {
        if (tMax <= tMin)
            return 1;
        return std::exp(-K2 * (lastRtt - tMin) / (tMax - tMin));
    }
    double Alpha() const { return K1 * g_libraCapMbps * Penalty(); }

    void PktsAcked(Ptr<TcpSocketState> tcb, uint32_t, const Time& rtt) override
    {
        if (rtt.IsZero())
            return;
        lastRtt = rtt.GetSeconds();
        if (tMax == 0)
            tMin = tMax = lastRtt;
        tMin = std::min(tMin, lastRtt);
        tMax = std::max(tMax, lastRtt);
        // The handshake's sample (SYN to SYN-ACK) never reaches PktsAcked;
        // ns-3 keeps it in m_minRtt. QUIC passes the ACKs of its handshake
        // packets to the congestion controller, so Tollgate's Tmin includes
        // that sample: --libraHandshakeRtt=1 (default) does the same.
        if (g_libraHandshakeRtt && tcb->m_minRtt < Time::Max())
            tMin = std::min(tMin, tcb->m_minRtt.GetSeconds());
    }

    void IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        uint32_t mss = tcb->m_segmentSize;
        if (tcb->m_cWnd < tcb->m_ssThresh && segmentsAcked > 0)
        {
            // Slow start: one segment per segment ACKed, up to ssthresh.
            uint32_t before = tcb->m_cWnd;
            tcb->m_cWnd = std::min(uint64_t(before) + uint64_t(segmentsAcked) * mss,
                                   uint64_t(tcb->m_ssThresh.Get()));
            segmentsAcked -= (tcb->m_cWnd - before) / mss;
        }
        if (tcb->m_cWnd >= tcb->m_ssThresh && segmentsAcked > 0)
        {
            double t = lastRtt;
            double w = double(tcb->m_cWnd) / mss;
            double p = Penalty();
            pSum += p;
            pN++;
            double packets = segmentsAcked / w * K1 * g_libraCapMbps * p * t * t / (t + T0);
            growthCarry += packets * mss;
            double whole = std::floor(growthCarry);
            growthCarry -= whole;
            tcb->m_cWnd = uint32_t(std::min(double(UINT32_MAX), double(tcb->m_cWnd.Get()) + whole));
        }
    }

    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t) override
    {
        double w = double(tcb->m_cWnd) * T1 / (2 * (lastRtt + T0));
        growthCarry = 0;
        return std::max(uint32_t(w), 2 * tcb->m_segmentSize);
    }

    void CongestionStateSet(Ptr<TcpSocketState>, const TcpSocketState::TcpCongState_t s) override
    {
        bool measured = Simulator::Now().GetSeconds() >= g_from;
        if (s == TcpSocketState::CA_RECOVERY)
        {
            events++;
            eventsFrom += measured;
        }
        else if (s == TcpSocketState::CA_LOSS)
        {
            rtos++;
            rtosFrom += measured;
        }
    }
};

static std::vector<uint64_t> g_drops;
// --floodMbps: the flood's sender address, its drops at the bottleneck and
// its sink's bytes, after --from.
static bool g_flood = false;
static Ipv4Address g_floodSrc;
static uint64_t g_floodDrops = 0, g_floodRx = 0;
static FILE* g_trace = nullptr; // --trace
static std::vector<uint32_t> g_cwnd; // each sender's window, bytes (--trace)
static std::vector<uint64_t> g_arrivals;
static std::vector<uint64_t> g_rx;
static std::vector<uint64_t> g_rx2; // --from2
static std::vector<Ipv4Address> g_src;

static Ptr<Queue<Packet>> g_q;
static void
Sample()
{
    fprintf(stderr, "t=%.0f qlen=%u\n", Simulator::Now().GetSeconds(), g_q->GetNPackets());
    Simulator::Schedule(Seconds(1), &Sample);
}

static void
AnyDrop(std::string ctx, Ptr<const Packet> p)
{
    static int n = 0;
    if (n++ < 5)
        fprintf(stderr, "drop at %s t=%.3f\n", ctx.c_str(), Simulator::Now().GetSeconds());
}

static void
AnyDrop2(std::string ctx, const Ipv4Header&, Ptr<const Packet> p, Ipv4L3Protocol::DropReason r, Ptr<Ipv4>, uint32_t)
{
    static int n = 0;
    if (n++ < 5)
        fprintf(stderr, "ip drop at %s t=%.3f reason %d\n", ctx.c_str(), Simulator::Now().GetSeconds(), (int)r);
}

// The config path of flow F's congestion window. Flow F's sender is node F:
// the senders are the first nodes created.
static std::string
CwndPath(size_t f)
{
    return "/NodeList/" + std::to_string(f) + "/$ns3::TcpL4Protocol/SocketList/0/CongestionWindow";
}

static void
CwndChange(uint32_t o, uint32_t n)
{
    if (n < o)
        fprintf(stderr, "t=%.4f cwnd %u -> %u\n", Simulator::Now().GetSeconds(), o, n);
}
static void
Hook()
{
    Config::ConnectWithoutContext(CwndPath(0), MakeCallback(&CwndChange));
}

static int
FlowOf(Ptr<const Packet> p)
{
    Ptr<Packet> c = p->Copy();
    PppHeader ppp;
    c->RemoveHeader(ppp);
    Ipv4Header ip;
    c->PeekHeader(ip);
    for (size_t i = 0; i < g_src.size(); i++)
    {
        if (ip.GetSource() == g_src[i])
        {
            return i;
        }
    }
    return -1;
}

// A drop after --from of flow F's packet: counted, and traced with --trace.
static void
CountFlowDrop(size_t f)
{
    g_drops[f]++;
    if (g_trace)
        fprintf(g_trace, "X,%ld,%zu\n", (long)Simulator::Now().GetNanoSeconds(), f);
}

static void
OnDrop(Ptr<const Packet> p)
{
    if (Simulator::Now().GetSeconds() < g_from)
        return;
    int f = FlowOf(p);
    if (f >= 0)
        CountFlowDrop(f);
    else if (g_flood)
    {
        Ptr<Packet> c = p->Copy();
        PppHeader ppp;
        c->RemoveHeader(ppp);
        Ipv4Header ip;
        c->PeekHeader(ip);
        g_floodDrops += ip.GetSource() == g_floodSrc;
    }
}

// A drop after --from of a packet from SRC, counted against its flow
// (the traffic-control layer's and the RED queue disc's drops).
static void
CountDrop(Ipv4Address src)
{
    if (Simulator::Now().GetSeconds() < g_from)
        return;
    for (size_t i = 0; i < g_src.size(); i++)
        if (src == g_src[i])
            CountFlowDrop(i);
    if (g_flood && src == g_floodSrc)
        g_floodDrops++;
}

// --trace: each sender's window, kept by the CongestionWindow trace and
// written every 100 ms from --from on.
static void
OnCwnd(size_t f, uint32_t, uint32_t now)
{
    g_cwnd[f] = now;
}

static void
HookCwnd(size_t f)
{
    Config::ConnectWithoutContext(CwndPath(f), MakeBoundCallback(&OnCwnd, f));
}

static void
SampleCwnd()
{
    if (Simulator::Now().GetSeconds() >= g_from)
        for (size_t f = 0; f < g_cwnd.size(); f++)
            fprintf(g_trace, "C,%ld,%zu,%u\n", (long)Simulator::Now().GetNanoSeconds(), f, g_cwnd[f]);
    Simulator::Schedule(MilliSeconds(100), &SampleCwnd);
}

// The RED or FQ-CoDel queue disc's drops (--red, --fqcodel), by flow.
static void
OnQdiscDrop(Ptr<const QueueDiscItem> item)
{
    Ptr<const Ipv4QueueDiscItem> ip = DynamicCast<const Ipv4QueueDiscItem>(item);
    if (ip)
        CountDrop(ip->GetHeader().GetSource());
}

// Mean backlog after --from, sampled every millisecond.
static Ptr<QueueDisc> g_qdisc;
static double g_qsum = 0;
static uint64_t g_qn = 0;
static void
SampleBacklog()
{
    if (Simulator::Now().GetSeconds() >= g_from)
    {
        g_qsum += g_q->GetNPackets() + (g_qdisc ? g_qdisc->GetNPackets() : 0);
        g_qn++;
    }
    Simulator::Schedule(MilliSeconds(1), &SampleBacklog);
}

static uint32_t g_maxq = 0;
static bool g_many = false; // --rtts given
static void
OnTcDrop(Ptr<const Packet> p)
{
    Ipv4Header ip;
    p->PeekHeader(ip);
    CountDrop(ip.GetSource());
}

static void
OnEnqueue(Ptr<const Packet> p)
{
    if (g_q && g_q->GetNPackets() > g_maxq)
    {
        g_maxq = g_q->GetNPackets();
        if (getenv("NS3DBG") && g_maxq > 160)
            fprintf(stderr, "maxq %u at %.4f\n", g_maxq, Simulator::Now().GetSeconds());
    }
    // Arrivals per flow are only reported in the 2-flow row; finding a
    // packet's flow costs a copy per packet, so the --rtts runs skip it.
    if (Simulator::Now().GetSeconds() < g_from || g_many)
        return;
    int f = FlowOf(p);
    if (f >= 0)
        g_arrivals[f]++;
}

static void
OnRx(int f, Ptr<const Packet> p, const Address&)
{
    if (Simulator::Now().GetSeconds() >= g_from)
        g_rx[f] += p->GetSize();
    if (g_from2 >= 0 && Simulator::Now().GetSeconds() >= g_from2)
        g_rx2[f] += p->GetSize();
}

static void
OnFloodRx(Ptr<const Packet> p, const Address&)
{
    if (Simulator::Now().GetSeconds() >= g_from)
        g_floodRx += p->GetSize();
}

// --fqcodel: each forwarded packet's sojourn time in the queue disc after
// --from, ms (the median goes on the summary line), taken from the queue
// disc's Dequeue trace (now - the item's enqueue time stamp). ns-3 fires
// that trace for the packets FQ-CoDel drops from the fattest queue when over
// its limit, and CoDel's drops at dequeue, too, each followed at once by the
// Drop trace: so a dequeued packet's time is kept pending, dropped with it,
// and counted when the packet reaches the device queue.
static Ptr<const QueueDiscItem> g_pendingItem;
static float g_pendingMs = 0;
static std::vector<float> g_sojournMs;
static std::map<uint32_t, std::vector<float>> g_sojournBySrc; // NS3DBG: per sender

static void
OnQdiscDequeue(Ptr<const QueueDiscItem> item)
{
    g_pendingItem = item;
    g_pendingMs = float((Simulator::Now() - item->GetTimeStamp()).GetSeconds() * 1e3);
}

static void
OnQdiscForget(Ptr<const QueueDiscItem> item)
{
    if (item == g_pendingItem)
        g_pendingItem = nullptr;
}

static void
OnForwarded(Ptr<const Packet> p)
{
    if (!g_pendingItem || PeekPointer(g_pendingItem->GetPacket()) != PeekPointer(p))
        return;
    if (Simulator::Now().GetSeconds() >= g_from)
    {
        g_sojournMs.push_back(g_pendingMs);
        if (getenv("NS3DBG"))
        {
            Ptr<const Ipv4QueueDiscItem> ip = DynamicCast<const Ipv4QueueDiscItem>(g_pendingItem);
            g_sojournBySrc[ip ? ip->GetHeader().GetSource().Get() : 0].push_back(g_pendingMs);
        }
    }
    g_pendingItem = nullptr;
}

// For a Libra sender: its recoveries (fast recovery entered) and timeouts
// over the whole run and from --from on, its RTT range, the mean penalty
// over its congestion-avoidance ACKs (whole run).
static void
PrintLibra(Ptr<Node> node)
{
    ObjectVectorValue socks;
    node->GetObject<TcpL4Protocol>()->GetAttribute("SocketList", socks);
    for (auto it = socks.Begin(); it != socks.End(); ++it)
    {
        PointerValue ops;
        it->second->GetAttribute("CongestionOps", ops);
        Ptr<TcpLibra> l = DynamicCast<TcpLibra>(ops.Get<TcpCongestionOps>());
        if (l)
            printf(" libra_recoveries=%lu libra_rtos=%lu recoveries_from=%lu rtos_from=%lu tmin_ms=%.2f"
                   " tmax_ms=%.2f mean_penalty=%.3f",
                   l->events, l->rtos, l->eventsFrom, l->rtosFrom, l->tMin * 1e3, l->tMax * 1e3,
                   l->pN ? l->pSum / l->pN : 0.0);
    }
}

int
main(int argc, char* argv[])
{
    uint32_t buf = 167;
    double duration = 300;
    uint32_t delack = 1;
    std::string recovery = "prr";
    bool pacing = false;
    uint32_t run = 1;
    double rttShort = 10, rttLong = 100;
    double jitterUs = 0;
    std::vector<double> rttList; // --rtts: N flows
    std::vector<double> starts;  // --starts: per-flow sender start, s
    double startJitter = 0;      // --startJitter=S: each start + uniform [0, S) s
    bool cubic = false;          // --cca=cubic: ns-3's TcpCubic
    bool libra = false;          // --cca=libra: TcpLibra above
    bool timestamps = true;      // --timestamps=0: no TCP timestamp option
    bool hystart = true;         // --hystart=0: TcpCubic without HyStart (ns-3's default is on)
    bool hystartDelayOnly = false; // --hystart=delay: only the delay-increase test
    double bottleneckDelayMs = 2, bottleneckMbps = 100;
    std::vector<std::string> ccaList; // --ccas: per-flow CCA
    double redMin = 0, redMax = 0;    // --red=MIN,MAX: RED queue disc
    bool backlog = false;             // --backlog=1: sample the mean backlog
    bool fqcodel = false;             // --fqcodel=1: FQ-CoDel queue disc
    uint32_t fifo = 0;                // --fifo=N: FIFO queue disc of N packets
    bool leafSplit = false;           // --leafSplit=1: access delay on both sides
    uint32_t mss = 1448;              // --mss=B
    double floodMbps = 0, floodRttMs = 20, floodStart = 1; // --floodMbps, --floodRtt, --floodStart
    std::string tracePath;            // --trace=FILE
    std::vector<double> ceb;          // --cebinae=DT_MS,L_US,P,TAU,DPORT,DFLOW,PERQ
    bool cebTollgate = false;         // --cebinaeBookkeeping=both
    double minRto = 0;                // --minRto=S (0: ns-3's default, 1 s)
    // --key=value arguments (ns3::CommandLine does not link against Debian's 3.37 build).
    for (int i = 1; i < argc; i++)
    {
        std::string a = argv[i];
        size_t eq = a.find('=');
        if (a.rfind("--", 0) != 0 || eq == std::string::npos)
        {
            fprintf(stderr, "bad argument %s\n", argv[i]);
            return 2;
        }
        std::string k = a.substr(2, eq - 2), v = a.substr(eq + 1);
        if (k == "buf") buf = std::stoul(v);
        else if (k == "duration") duration = std::stod(v);
        else if (k == "from") g_from = std::stod(v);
        else if (k == "delack") delack = std::stoul(v);
        else if (k == "recovery") recovery = v;
        else if (k == "pacing") pacing = v == "1" || v == "true";
        else if (k == "run") run = std::stoul(v);
        else if (k == "rttShort") rttShort = std::stod(v);
        else if (k == "rttLong") rttLong = std::stod(v);
        else if (k == "jitterUs") jitterUs = std::stod(v);
        else if (k == "rtts")
        {
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ','))
                rttList.push_back(std::stod(item));
        }
        else if (k == "starts")
        {
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ','))
                starts.push_back(std::stod(item));
        }
        else if (k == "ccas")
        {
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ','))
            {
                if (item != "newreno" && item != "linuxreno" && item != "highspeed" && item != "cubic" &&
                    item != "libra")
                {
                    fprintf(stderr, "--ccas: unknown CCA %s (newreno, linuxreno, highspeed, cubic or libra)\n",
                            item.c_str());
                    return 2;
                }
                ccaList.push_back(item);
            }
        }
        else if (k == "red")
        {
            size_t c = v.find(',');
            if (c == std::string::npos)
            {
                fprintf(stderr, "--red=MIN,MAX: two thresholds in packets\n");
                return 2;
            }
            redMin = std::stod(v.substr(0, c));
            redMax = std::stod(v.substr(c + 1));
        }
        else if (k == "backlog") backlog = v == "1" || v == "true";
        else if (k == "fqcodel") fqcodel = v == "1" || v == "true";
        else if (k == "fifo") fifo = std::stoul(v);
        else if (k == "leafSplit") leafSplit = v == "1" || v == "true";
        else if (k == "mss") mss = std::stoul(v);
        else if (k == "accessMbps") g_accessMbps = std::stod(v);
        else if (k == "from2") g_from2 = std::stod(v);
        else if (k == "floodMbps") floodMbps = std::stod(v);
        else if (k == "floodRtt") floodRttMs = std::stod(v);
        else if (k == "floodStart") floodStart = std::stod(v);
        else if (k == "trace") tracePath = v;
        else if (k == "cebinae")
        {
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ','))
                ceb.push_back(std::stod(item));
            if (ceb.size() != 7)
            {
                fprintf(stderr, "--cebinae=DT_MS,L_US,P,TAU,DPORT,DFLOW,PERQ\n");
                return 2;
            }
        }
        else if (k == "cebinaeBookkeeping") cebTollgate = v == "both";
        else if (k == "minRto") minRto = std::stod(v);
        else if (k == "tax") g_tax = std::stod(v);
        else if (k == "cca")
        {
            if (v != "newreno" && v != "cubic" && v != "libra")
            {
                fprintf(stderr, "--cca: newreno, cubic or libra\n");
                return 2;
            }
            cubic = v == "cubic";
            libra = v == "libra";
        }
        else if (k == "libraCapMbps") g_libraCapMbps = std::stod(v);
        else if (k == "libraHandshakeRtt") g_libraHandshakeRtt = v == "1" || v == "true";
        else if (k == "startJitter") startJitter = std::stod(v);
        else if (k == "timestamps") timestamps = v == "1" || v == "true";
        else if (k == "hystart")
        {
            hystart = v == "1" || v == "true" || v == "delay";
            hystartDelayOnly = v == "delay";
        }
        else if (k == "bottleneckDelay") bottleneckDelayMs = std::stod(v);
        else if (k == "bottleneckMbps") bottleneckMbps = std::stod(v);
        else { fprintf(stderr, "unknown %s\n", k.c_str()); return 2; }
    }

    RngSeedManager::SetRun(run);
    if (!ceb.empty() && (fqcodel || redMax > 0 || fifo > 0))
    {
        fprintf(stderr, "--cebinae, --fqcodel, --red and --fifo: one queue disc at a time\n");
        return 2;
    }
    if (minRto > 0)
        Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(minRto)));
    if ((fqcodel && redMax > 0) || (fifo > 0 && (fqcodel || redMax > 0)))
    {
        fprintf(stderr, "--fqcodel, --red and --fifo: one queue disc at a time\n");
        return 2;
    }
    g_flood = floodMbps > 0;
    if (g_flood && floodRttMs / 2 < bottleneckDelayMs)
    {
        fprintf(stderr, "--floodRtt must be at least twice the bottleneck delay\n");
        return 2;
    }
    bool anyLibra = libra || std::find(ccaList.begin(), ccaList.end(), "libra") != ccaList.end();
    if (anyLibra && g_libraCapMbps <= 0)
    {
        fprintf(stderr, "--libraCapMbps must be positive\n");
        return 2;
    }
    if (libra && g_tax > 0)
    {
        fprintf(stderr, "--tax does not apply to --cca=libra\n");
        return 2;
    }
    // Libra reads the latest RTT sample: with gain 1 the estimator's value
    // (what ns-3 passes to PktsAcked) is the latest sample. Other flows' RTO
    // then follows the latest sample too.
    if (anyLibra)
        Config::SetDefault("ns3::RttMeanDeviation::Alpha", DoubleValue(1));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(timestamps));
    TypeId cca = libra ? TcpLibra::GetTypeId() : cubic ? (g_tax > 0 ? Taxed<TcpCubic>::GetTypeId() : TcpCubic::GetTypeId())
                       : (g_tax > 0 ? Taxed<TcpNewReno>::GetTypeId() : TcpNewReno::GetTypeId());
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(cca));
    Config::SetDefault("ns3::TcpCubic::HyStart", BooleanValue(hystart));
    if (hystartDelayOnly)
    {
        Config::SetDefault("ns3::TcpCubic::HyStartDetect", IntegerValue(2)); // TcpCubic::DELAY (a private enum)
    }
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(recovery == "prr" ? TcpPrrRecovery::GetTypeId()
                                                     : TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(32 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(32 << 20));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delack));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocketState::EnablePacing", BooleanValue(pacing));

    bool many = !rttList.empty();
    g_many = many;
    std::vector<double> rtts = many ? rttList : std::vector<double>{rttShort, rttLong};
    size_t n = rtts.size();
    g_drops.assign(n, 0);
    g_arrivals.assign(n, 0);
    g_rx.assign(n, 0);
    g_rx2.assign(n, 0);
    g_src.assign(n, Ipv4Address());
    starts.resize(std::max(starts.size(), n), 0.0);
    if (startJitter > 0)
    {
        Ptr<UniformRandomVariable> su = CreateObject<UniformRandomVariable>();
        for (size_t i = 0; i < n; i++)
            starts[i] += su->GetValue(0, startJitter);
    }

    NodeContainer snd, rcv, rt, fl;
    snd.Create(n);
    rcv.Create(n);
    rt.Create(2);
    if (g_flood)
        fl.Create(2); // the flood's sender and receiver, after the others (CwndPath)
    InternetStackHelper stack;
    stack.InstallAll();

    PointToPointHelper bott;
    DataRate bottleneckRate(uint64_t(bottleneckMbps * 1e6));
    Time bottleneckDelay = NanoSeconds(int64_t(bottleneckDelayMs * 1e6 + 0.5));
    bott.SetDeviceAttribute("DataRate", DataRateValue(bottleneckRate));
    bott.SetChannelAttribute("Delay", TimeValue(bottleneckDelay));
    bool red = redMax > 0;
    bool qdisc = red || fqcodel;
    bott.SetDeviceAttribute("Mtu", UintegerValue(1500));
    bott.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(qdisc ? "1p" : std::to_string(buf) + "p"));
    NetDeviceContainer bd = bott.Install(rt.Get(0), rt.Get(1));

    TrafficControlHelper tch;
    if (red)
    {
        tch.SetRootQueueDisc("ns3::RedQueueDisc",
                             "MaxSize", QueueSizeValue(QueueSize(std::to_string(buf) + "p")),
                             "MinTh", DoubleValue(redMin), "MaxTh", DoubleValue(redMax),
                             "LInterm", DoubleValue(10), "QW", DoubleValue(0.002),
                             "Gentle", BooleanValue(true), "MeanPktSize", UintegerValue(1000),
                             "LinkBandwidth", DataRateValue(bottleneckRate),
                             "LinkDelay", TimeValue(bottleneckDelay));
        QueueDiscContainer qdc = tch.Install(bd.Get(0));
        g_qdisc = qdc.Get(0);
        g_qdisc->TraceConnectWithoutContext("Drop", MakeCallback(&OnQdiscDrop));
    }
    if (fqcodel)
    {
        tch.SetRootQueueDisc("ns3::FqCoDelQueueDisc",
                             "MaxSize", QueueSizeValue(QueueSize(std::to_string(buf) + "p")),
                             "Interval", StringValue("100ms"), "Target", StringValue("5ms"),
                             "Flows", UintegerValue(1024));
        QueueDiscContainer qdc = tch.Install(bd.Get(0));
        g_qdisc = qdc.Get(0);
        DynamicCast<FqCoDelQueueDisc>(g_qdisc)->SetQuantum(1514);
        g_qdisc->TraceConnectWithoutContext("Drop", MakeCallback(&OnQdiscDrop));
        g_qdisc->TraceConnectWithoutContext("Dequeue", MakeCallback(&OnQdiscDequeue));
        g_qdisc->TraceConnectWithoutContext("Drop", MakeCallback(&OnQdiscForget));
    }
    if (fifo > 0)
    {
        tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", QueueSizeValue(QueueSize(std::to_string(fifo) + "p")));
        QueueDiscContainer qdc = tch.Install(bd.Get(0));
        g_qdisc = qdc.Get(0);
        g_qdisc->TraceConnectWithoutContext("Drop", MakeCallback(&OnQdiscDrop));
    }
    Ptr<CebinaeQd> cebQd;
    if (!ceb.empty())
    {
        CebinaeQd::GetTypeId(); // registers the name
        tch.SetRootQueueDisc("TgCebinaeQd");
        QueueDiscContainer qdc = tch.Install(bd.Get(0));
        g_qdisc = qdc.Get(0);
        cebQd = DynamicCast<CebinaeQd>(g_qdisc);
        cebQd->line = bottleneckMbps * 1e6;
        cebQd->dt = NanoSeconds(int64_t(ceb[0] * 1e6 + 0.5));
        cebQd->l = NanoSeconds(int64_t(ceb[1] * 1e3 + 0.5));
        cebQd->p = uint32_t(ceb[2]);
        cebQd->tau = ceb[3];
        cebQd->dPort = ceb[4];
        cebQd->dFlow = ceb[5];
        cebQd->perQueue = uint32_t(ceb[6]);
        cebQd->tollgate = cebTollgate;
        cebQd->Start();
        g_qdisc->TraceConnectWithoutContext("Drop", MakeCallback(&OnQdiscDrop));
    }
    Ipv4AddressHelper addr;
    addr.SetBase("10.9.0.0", "255.255.255.0");
    addr.Assign(bd);
    if (!qdisc && fifo == 0 && ceb.empty())
        tch.Uninstall(bd.Get(0));
    for (size_t i = 0; i < ccaList.size() && i < n; i++)
    {
        TypeId t = ccaList[i] == "highspeed" ? TcpHighSpeed::GetTypeId()
                 : ccaList[i] == "cubic"     ? TcpCubic::GetTypeId()
                 : ccaList[i] == "linuxreno" ? TcpLinuxReno::GetTypeId()
                 : ccaList[i] == "libra"     ? TcpLibra::GetTypeId()
                                             : TcpNewReno::GetTypeId();
        snd.Get(i)->GetObject<TcpL4Protocol>()->SetAttribute("SocketType", TypeIdValue(t));
    }

    for (size_t i = 0; i < n; i++)
    {
        int64_t jit = int64_t(jitterUs * 1e3 + 0.5);
        double accessMs = rtts[i] / 2 - bottleneckDelayMs;
        double recvMs = leafSplit ? accessMs / 2 : 0;
        NetDeviceContainer a = AccessLink(snd.Get(i), rt.Get(0),
                                          NanoSeconds(int64_t((accessMs - recvMs) * 1e6 + 0.5)), jit);
        addr.SetBase(("10.1." + std::to_string(i) + ".0").c_str(), "255.255.255.0");
        Ipv4InterfaceContainer ia = addr.Assign(a);
        g_src[i] = ia.GetAddress(0);
        NetDeviceContainer r = AccessLink(rt.Get(1), rcv.Get(i), NanoSeconds(int64_t(recvMs * 1e6 + 0.5)), jit);
        addr.SetBase(("10.2." + std::to_string(i) + ".0").c_str(), "255.255.255.0");
        Ipv4InterfaceContainer ir = addr.Assign(r);

        uint16_t port = 5000 + i;
        BulkSendHelper src("ns3::TcpSocketFactory", InetSocketAddress(ir.GetAddress(1), port));
        src.SetAttribute("MaxBytes", UintegerValue(0));
        ApplicationContainer sa = src.Install(snd.Get(i));
        sa.Start(Seconds(i < starts.size() ? starts[i] : 0.0));
        PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer ka = sink.Install(rcv.Get(i));
        ka.Start(Seconds(0));
        ka.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, int(i)));
    }
    if (g_flood)
    {
        int64_t jit = int64_t(jitterUs * 1e3 + 0.5);
        NetDeviceContainer a = AccessLink(fl.Get(0), rt.Get(0),
                                          NanoSeconds(int64_t((floodRttMs / 2 - bottleneckDelayMs) * 1e6 + 0.5)), jit);
        addr.SetBase("10.3.0.0", "255.255.255.0");
        g_floodSrc = addr.Assign(a).GetAddress(0);
        NetDeviceContainer r = AccessLink(rt.Get(1), fl.Get(1), Seconds(0), jit);
        addr.SetBase("10.4.0.0", "255.255.255.0");
        Ipv4InterfaceContainer ir = addr.Assign(r);
        // 1472-byte payloads: 1500-byte IP packets, sent at floodMbps of IP bytes.
        OnOffHelper src("ns3::UdpSocketFactory", InetSocketAddress(ir.GetAddress(1), 6000));
        src.SetConstantRate(DataRate(uint64_t(floodMbps * 1e6 * 1472 / 1500)), 1472);
        ApplicationContainer sa = src.Install(fl.Get(0));
        sa.Start(Seconds(floodStart));
        PacketSinkHelper sink("ns3::UdpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 6000));
        ApplicationContainer ka = sink.Install(fl.Get(1));
        ka.Start(Seconds(0));
        ka.Get(0)->TraceConnectWithoutContext("Rx", MakeCallback(&OnFloodRx));
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    Ptr<Queue<Packet>> q = DynamicCast<PointToPointNetDevice>(bd.Get(0))->GetQueue();
    q->TraceConnectWithoutContext("Drop", MakeCallback(&OnDrop));
    q->TraceConnectWithoutContext("Enqueue", MakeCallback(&OnEnqueue));
    if (fqcodel)
        q->TraceConnectWithoutContext("Enqueue", MakeCallback(&OnForwarded));

    g_q = q;
    if (backlog)
        Simulator::Schedule(MilliSeconds(1), &SampleBacklog);
    if (!tracePath.empty())
    {
        g_trace = fopen(tracePath.c_str(), "w");
        if (!g_trace)
        {
            perror(tracePath.c_str());
            return 2;
        }
        g_cwnd.assign(n, 0);
        // Each sender's socket exists once its application has started.
        for (size_t i = 0; i < n; i++)
            Simulator::Schedule(Seconds((i < starts.size() ? starts[i] : 0.0) + 0.001), &HookCwnd, i);
        Simulator::Schedule(MilliSeconds(100), &SampleCwnd);
    }
    rt.Get(0)->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext("TcDrop", MakeCallback(&OnTcDrop));
    if (getenv("NS3DBG"))
    {
        Config::Connect("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/TxQueue/Drop", MakeCallback(&AnyDrop));
        Config::Connect("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/PhyRxDrop", MakeCallback(&AnyDrop));
        Config::Connect("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/MacTxDrop", MakeCallback(&AnyDrop));
        Config::Connect("/NodeList/*/$ns3::Ipv4L3Protocol/Drop", MakeCallback(&AnyDrop2));
    }
    if (getenv("NS3DBG"))
    {
        Simulator::Schedule(Seconds(1), &Sample);
        Simulator::Schedule(Seconds(0.001), &Hook);
    }
    Simulator::Stop(Seconds(duration));
    Simulator::Run();
    if (g_trace)
        fclose(g_trace);
    double span = duration - g_from;
    if (many)
    {
        double sum = 0, sq = 0, sum2 = 0, sq2 = 0;
        for (size_t i = 0; i < n; i++)
        {
            double g = g_rx[i] * 8 / span / 1e6;
            sum += g;
            sq += g * g;
            printf("flow=%zu rtt_ms=%g cca=%s goodput_mbps=%.3f drops=%lu", i, rtts[i],
                   i < ccaList.size() ? ccaList[i].c_str() : (cubic ? "cubic" : libra ? "libra" : "newreno"), g,
                   g_drops[i]);
            if (g_from2 >= 0)
            {
                double g2 = g_rx2[i] * 8 / (duration - g_from2) / 1e6;
                sum2 += g2;
                sq2 += g2 * g2;
                printf(" goodput2_mbps=%.3f", g2);
            }
            PrintLibra(snd.Get(i));
            printf("\n");
        }
        double flood = g_floodRx * 8 / span / 1e6;
        if (g_flood)
            printf("flow=flood rtt_ms=%g cca=udp-cbr goodput_mbps=%.3f drops=%lu\n", floodRttMs, flood,
                   g_floodDrops);
        printf("total_mbps=%.3f jfi=%.4f", sum, sq > 0 ? sum * sum / (n * sq) : 0.0);
        if (g_from2 >= 0)
            printf(" total2_mbps=%.3f jfi2=%.4f", sum2, sq2 > 0 ? sum2 * sum2 / (n * sq2) : 0.0);
        if (g_flood)
            printf(" tcp_share=%.4f", sum + flood > 0 ? sum / (sum + flood) : 0.0);
        if (fqcodel)
        {
            double p50 = 0, p99 = 0;
            if (!g_sojournMs.empty())
            {
                std::sort(g_sojournMs.begin(), g_sojournMs.end());
                p50 = g_sojournMs[g_sojournMs.size() / 2];
                p99 = g_sojournMs[g_sojournMs.size() * 99 / 100];
            }
            printf(" qdelay_p50_ms=%.2f qdelay_p99_ms=%.2f", p50, p99);
        }
        if (backlog)
            printf(" qlen_mean_pkts=%.1f", g_qn ? g_qsum / g_qn : 0.0);
        if (cebQd)
            printf(" cebinae_evals=%lu saturated=%lu lbf_drops=%lu tail_arrivals=%lu", cebQd->evals,
                   cebQd->saturated, cebQd->lbfDrops, cebQd->tailArrivals);
        printf("\n");
        if (getenv("NS3DBG") && fqcodel)
            fprintf(stderr, "FQ-CoDel flow queues in use: %zu, quantum %u bytes\n", g_qdisc->GetNQueueDiscClasses(),
                    DynamicCast<FqCoDelQueueDisc>(g_qdisc)->GetQuantum());
        if (getenv("NS3DBG"))
            for (auto& [src, v] : g_sojournBySrc)
            {
                std::sort(v.begin(), v.end());
                fprintf(stderr, "sojourn src %u.%u.%u.%u: n %zu p10 %.2f p50 %.2f p90 %.2f ms\n", src >> 24,
                        (src >> 16) & 255, (src >> 8) & 255, src & 255, v.size(), v[v.size() / 10],
                        v[v.size() / 2], v[v.size() * 9 / 10]);
            }
        if (fqcodel && g_qdisc->GetNQueueDiscClasses() < n + g_flood)
            fprintf(stderr, "warning: %zu flows in %zu FQ-CoDel flow queues (hash collision)\n", n + g_flood,
                    g_qdisc->GetNQueueDiscClasses());
        Simulator::Destroy();
        return 0;
    }
    double g0 = g_rx[0] * 8 / span / 1e6, g1 = g_rx[1] * 8 / span / 1e6;
    uint64_t a0 = g_arrivals[0] + g_drops[0], a1 = g_arrivals[1] + g_drops[1];
    printf("| ns-3 %s delack=%u pacing=%d jitter=%gus | %u | %u | %lu/%lu | %.3f/%.3f | %.1f/%.1f | %.2f |\n",
           recovery.c_str(), delack, pacing, jitterUs, buf, run, g_drops[0], g_drops[1],
           a0 ? g_drops[0] * 1e3 / a0 : 0.0, a1 ? g_drops[1] * 1e3 / a1 : 0.0, g0, g1,
           g1 > 0 ? g0 / g1 : 0.0);
    if (getenv("NS3DBG"))
    {
        Ptr<TrafficControlLayer> tc = rt.Get(0)->GetObject<TrafficControlLayer>();
        fprintf(stderr, "queue: rx %u drops %u max %s; root qdisc %p\n", q->GetTotalReceivedPackets(),
                q->GetTotalDroppedPackets(), q->GetMaxSize().GetValue() ? std::to_string(q->GetMaxSize().GetValue()).c_str() : "?",
                (void*)PeekPointer(tc->GetRootQueueDiscOnDevice(bd.Get(0))));
    }
    if (getenv("NS3DBG"))
        for (uint32_t n = 0; n < NodeList::GetNNodes(); n++)
        {
            Ptr<Node> node = NodeList::GetNode(n);
            Ptr<TrafficControlLayer> tc = node->GetObject<TrafficControlLayer>();
            for (uint32_t d = 0; d < node->GetNDevices(); d++)
            {
                Ptr<QueueDisc> qd = tc ? tc->GetRootQueueDiscOnDevice(node->GetDevice(d)) : nullptr;
                if (qd && qd->GetStats().nTotalDroppedPackets)
                    fprintf(stderr, "node %u dev %u qdisc drops %u\n", n, d, qd->GetStats().nTotalDroppedPackets);
            }
        }
    Simulator::Destroy();
    return 0;
}
