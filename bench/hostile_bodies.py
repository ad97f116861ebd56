#!/usr/bin/env python3
"""What hostile request bodies cost a running daemon's HTTP door (docs/HARDENING.md): sends
CONCURRENCY copies of each body at once to PATH and, meanwhile, polls GET /health; prints
each body's answer status, the slowest answer, the slowest /health, and the daemon's RSS
before and after (from /proc, when --pid is given). Prints numbers; asserts nothing.

  bench/hostile_bodies.py --port 8080 --pid $(pgrep -f 'pagoda serve') --concurrency 4
"""

import argparse
import http.client
import threading
import time


def bodies():
    mib16 = 16 << 20
    yield "16 MiB of '['", b"[" * (mib16 - 64)
    values = (mib16 - 64) // 2
    yield f"{1 << 20} values (the limit)", b"[" + b"1," * ((1 << 20) - 1) + b"1]"
    yield f"{values} values", b"[" + b"1," * (values - 1) + b"1]"
    yield "500,000 empty chat messages", (
        b'{"messages": [' + b",".join([b'{"role":"user","content":""}'] * 500000) + b"]}")


def rss_kib(pid):
    if pid is None:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def post(port, path, body, out, i):
    start = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        out[i] = (r.status, time.monotonic() - start)
    except OSError as e:
        out[i] = (str(e), time.monotonic() - start)
    finally:
        c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int)
    p.add_argument("--path", default="/v1/chat/completions")
    p.add_argument("--concurrency", type=int, default=4)
    args = p.parse_args()
    for name, body in bodies():
        before = rss_kib(args.pid)
        out = [None] * args.concurrency
        threads = [threading.Thread(target=post, args=(args.port, args.path, body, out, i))
                   for i in range(args.concurrency)]
        for t in threads:
            t.start()
        worst_health = 0.0
        while any(t.is_alive() for t in threads):
            start = time.monotonic()
            c = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
            c.request("GET", "/health")
            c.getresponse().read()
            c.close()
            worst_health = max(worst_health, time.monotonic() - start)
            time.sleep(0.01)
        for t in threads:
            t.join()
        after = rss_kib(args.pid)
        statuses = sorted({str(s) for s, _ in out})
        print(f"{name}: {len(body)} bytes x {args.concurrency}: status {','.join(statuses)}, "
              f"slowest answer {max(d for _, d in out):.3f} s, slowest /health "
              f"{worst_health * 1000:.1f} ms"
              + (f", RSS {before // 1024} -> {after // 1024} MiB" if before else ""))


if __name__ == "__main__":
    main()
