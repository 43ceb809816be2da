#!/usr/bin/env bash
# Capture a testbed run on both hosts' interfaces, for pcap_timing.py.
#
#   sudo tools/reproduce/noise/capture-testbed.sh SCENARIO OUT [testbed options]
#
# Runs `tollgate testbed SCENARIO --out OUT/results ...` and, inside its client
# and server namespaces, tcpdump on eth0 (nanosecond kernel timestamps, the
# first 96 bytes of each UDP datagram): OUT/sender.pcap and OUT/receiver.pcap.
# The emulator's equivalent: tollgate sim SCENARIO --pcap OUT.
# Needs root, tcpdump, a release build (TOLLGATE, default
# target/release/tollgate; the router binary next to it).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,10p "$0"; exit 2; }
scenario=$1
out=$2
shift 2
tollgate=${TOLLGATE:-target/release/tollgate}
command -v tcpdump >/dev/null || { echo "tcpdump not found (apt-get install tcpdump)" >&2; exit 1; }
mkdir -p "$out"
before=$(ip netns list | awk '{print $1}' | sort)
"$tollgate" testbed "$scenario" --out "$out/results" --no-plots -q \
  --router-bin "$(dirname "$tollgate")/tollgate-router" "$@" &
testbed=$!
client_ns=""
for _ in $(seq 1 400); do
  client_ns=$(comm -13 <(echo "$before") <(ip netns list | awk '{print $1}' | sort) | grep -- '-c$' || true)
  [ -n "$client_ns" ] && ip -n "$client_ns" link show eth0 >/dev/null 2>&1 && break
  sleep 0.05
done
[ -n "$client_ns" ] || { echo "the testbed's namespaces did not appear" >&2; kill "$testbed"; exit 1; }
server_ns=${client_ns%-c}-s
for _ in $(seq 1 100); do ip -n "$server_ns" link show eth0 >/dev/null 2>&1 && break; sleep 0.05; done
cap() {
  ip netns exec "$1" tcpdump -i eth0 -w "$2" --time-stamp-precision=nano -s 96 -B 65536 -n -q udp \
    2>>"$out/tcpdump.err" &
}
cap "$client_ns" "$out/sender.pcap"
sender_cap=$!
cap "$server_ns" "$out/receiver.pcap"
receiver_cap=$!
status=0
wait "$testbed" || status=$?
kill -INT "$sender_cap" "$receiver_cap" 2>/dev/null || true
wait "$sender_cap" "$receiver_cap" 2>/dev/null || true
grep -h "packets dropped by kernel" "$out/tcpdump.err" || true
exit "$status"
