#!/usr/bin/env python3
"""Holds N concurrent server-sent-event streams open against pagoda's HTTP door and reports
what the daemon spends on them (threads, RSS) while every stream is open.

  pagoda serve --http-port 8080 --max-seqs 1024 &
  python3 scripts/http-sse-load.py --port 8080 --streams 1000 --pid $(pgrep -n pagoda)

Standard library only. Each stream is a POST /v1/completions with "stream": true on its own
connection; once every stream has received its first event, the daemon's Threads and VmRSS
are read from /proc/PID/status; then every stream is read to its end ([DONE]).
"""
import argparse
import asyncio
import json
import time


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS", "VmHWM"):
                out[key] = value.strip()
    return out


async def stream(args, first_event, results, index):
    reader, writer = await asyncio.open_connection(args.host, args.port)
    body = json.dumps({"prompt": args.prompt, "max_tokens": args.max_tokens,
                       "ignore_eos": True, "temperature": 0, "stream": True})
    writer.write((f"POST /v1/completions HTTP/1.1\r\nHost: {args.host}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                  f"Connection: close\r\n\r\n{body}").encode())
    await writer.drain()
    events, done, seen_first = 0, False, False
    status = (await reader.readline()).decode().split(" ")[1]
    while True:
        line = await reader.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            events += 1
            if not seen_first:
                seen_first = True
                first_event.release()
            if line.strip() == b"data: [DONE]":
                done = True
    if not seen_first:
        first_event.release()
    writer.close()
    results[index] = (status, events, done)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=400)
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("--pid", type=int, required=True, help="the daemon's pid")
    args = p.parse_args()
    before = proc_status(args.pid)
    first_event = asyncio.Semaphore(0)
    results = [None] * args.streams
    start = time.monotonic()
    tasks = [asyncio.create_task(stream(args, first_event, results, i))
             for i in range(args.streams)]
    for _ in range(args.streams):
        await first_event.acquire()
    opened = time.monotonic() - start
    during = proc_status(args.pid)
    await asyncio.gather(*tasks)
    total = time.monotonic() - start
    ok = sum(1 for r in results if r and r[0] == "200" and r[2])
    events = sum(r[1] for r in results if r)
    print(json.dumps({"streams": args.streams, "completed_ok": ok, "events": events,
                      "all_open_after_s": round(opened, 2), "total_s": round(total, 2),
                      "daemon_before": before, "daemon_all_open": during,
                      "daemon_after": proc_status(args.pid)}, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
