#!/usr/bin/env python3
"""Flow helpers for the DPDK end-to-end test (run inside network namespaces).

  recv SECONDS              TCP server on 5001 and UDP sink on 5002; prints JSON
                            {"tcp": {"<cca>": bytes}, "udp": bytes} after SECONDS.
  tcp  DST CCA SECONDS      one TCP connection using congestion control CCA,
                            sends the CCA name first, then bulk data for SECONDS.
  udp  DST MBPS SECONDS     unresponsive UDP flood at MBPS for SECONDS.
Only ever talks to DST, an address inside the test's own namespaces.
"""
import json, selectors, socket, sys, time

def recv(seconds):
    sel = selectors.DefaultSelector()
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", 5001)); ls.listen(16); ls.setblocking(False)
    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); us.bind(("0.0.0.0", 5002)); us.setblocking(False)
    sel.register(ls, selectors.EVENT_READ, "listen"); sel.register(us, selectors.EVENT_READ, "udp")
    tcp, names, udp = {}, {}, 0
    end = time.time() + seconds
    while time.time() < end:
        for key, _ in sel.select(timeout=0.1):
            if key.data == "listen":
                c, _ = ls.accept(); c.setblocking(False); sel.register(c, selectors.EVENT_READ, "conn"); tcp[c] = 0
            elif key.data == "udp":
                try:
                    while True:
                        udp += len(us.recv(65536))
                except BlockingIOError:
                    pass
            else:
                c = key.fileobj
                try:
                    d = c.recv(1 << 20)
                except (BlockingIOError, ConnectionResetError):
                    continue
                if not d:
                    sel.unregister(c); continue
                if c not in names:
                    names[c] = d[:8].decode(errors="replace").strip("\0 ")
                tcp[c] += len(d)
    out = {}
    for c, n in tcp.items():
        out[names.get(c, "?")] = out.get(names.get(c, "?"), 0) + n
    print(json.dumps({"tcp": out, "udp": udp, "seconds": seconds}))

def tcp(dst, cca, seconds):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cca.encode())
    s.connect((dst, 5001))
    s.sendall(cca.encode().ljust(8, b"\0"))
    buf = b"x" * 65536
    end = time.time() + seconds
    s.settimeout(1.0)
    while time.time() < end:
        try:
            s.send(buf)
        except socket.timeout:
            pass
    s.close()

def udp(dst, mbps, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"u" * 1400
    pps = mbps * 1e6 / 8 / (len(payload) + 42)
    start = time.time(); sent = 0
    while True:
        now = time.time()
        if now - start >= seconds:
            break
        due = int((now - start) * pps)
        while sent < due:
            try:
                s.sendto(payload, (dst, 5002))
            except OSError:
                pass
            sent += 1
        time.sleep(0.0005)

if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "recv":
        recv(float(a[1]))
    elif a[0] == "tcp":
        tcp(a[1], a[2], float(a[3]))
    elif a[0] == "udp":
        udp(a[1], float(a[2]), float(a[3]))
