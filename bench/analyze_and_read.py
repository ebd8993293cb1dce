#!/usr/bin/env python3
"""Readers and sampled analysis on one oracleGeneral file: the figures of issue 20, item 5.

Whole processes, interleaved, ROUNDS times (the order rotates each round), each timed by wall
clock and by CPU (user + sys from wait4; on a shared, busy machine wall time mostly measures
waiting for a core):

- `tiercache trace stats FILE` (reads every record, footprint included): records per CPU second;
- `tiercache analyze FILE` (exact) against `tiercache analyze FILE --shards-rate RATE` (sampled,
  the exact stacks skipped): the ratios of their wall and CPU times (analyze decodes the trace
  on a second thread, so its wall time is below its CPU time), and a check that the sampled run's
  SHARDS estimates equal those of a run that keeps the exact stacks too (--exact), bit for bit;
- with --base OLD_BIN, the same commands of an older binary (whose sampled run still computed
  the exact stacks).

Reading alone (no per-request work): `cargo run --release -p tiercache-trace --example
bench_read -- 10000000 /tmp oracle`.

Usage: bench/analyze_and_read.py FILE [--rounds 3] [--rate 0.001] [--bin target/release/tiercache]
       [--base OLD_BIN]

Make a 10M-record file with `cargo run --release -p tiercache --example zipf_oracle -- /tmp/z10.oG
10000000 3500000 0.8`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd):
    """As run, with CPU seconds from wait4."""
    started = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed")
    return out.decode(), wall, usage.ru_utime + usage.ru_stime


def span(xs):
    return f"{statistics.median(xs):7.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", default="0.001")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/tiercache"))
    ap.add_argument("--base")
    args = ap.parse_args()
    records = os.path.getsize(args.trace) // 24
    fmt = ["--format", "oracle-general"]
    jobs = {}
    for name, binary in [("new", args.bin)] + ([("base", args.base)] if args.base else []):
        jobs[f"{name} trace stats"] = [binary, "trace", "stats", args.trace] + fmt
        jobs[f"{name} analyze exact"] = [binary, "analyze", args.trace, "--json"] + fmt
        jobs[f"{name} analyze sampled"] = [binary, "analyze", args.trace, "--json",
                                           "--shards-rate", args.rate] + fmt
    times = {k: ([], []) for k in jobs}
    outputs = {}
    names = list(jobs)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            out, wall, cpu = timed(jobs[name])
            times[name][0].append(wall)
            times[name][1].append(cpu)
            outputs[name] = out
    # The sampled estimates against a run that keeps the exact stacks as well.
    both, _, _ = timed([args.bin, "analyze", args.trace, "--json", "--shards-rate", args.rate,
                        "--exact"] + fmt)
    sampled = json.loads(outputs["new analyze sampled"])
    exact = json.loads(both)
    same = [p["shards_miss_ratio"] for p in sampled["curve"]] == \
        [p["shards_miss_ratio"] for p in exact["curve"]]
    print(f"{args.trace}: {records} records, {args.rounds} rounds; medians (min-max)")
    print(f"{'command':24} {'wall s':>22} {'cpu s':>22} {'M records / cpu s':>18}")
    for name, (wall, cpu) in times.items():
        rate = records / statistics.median(cpu) / 1e6
        print(f"{name:24} {span(wall):>22} {span(cpu):>22} {rate:18.1f}")
    for side in ["new"] + (["base"] if args.base else []):
        ex_wall, ex = (statistics.median(t) for t in times[f"{side} analyze exact"])
        sa_wall, sa = (statistics.median(t) for t in times[f"{side} analyze sampled"])
        print(f"{side}: exact / sampled analysis: wall {ex_wall / sa_wall:.1f}x, CPU {ex / sa:.1f}x")
    if args.base:
        for what in ["trace stats", "analyze exact", "analyze sampled"]:
            b = statistics.median(times[f"base {what}"][1])
            n = statistics.median(times[f"new {what}"][1])
            bw = statistics.median(times[f"base {what}"][0])
            nw = statistics.median(times[f"new {what}"][0])
            print(f"{what}: base / new: wall {bw / nw:.2f}x, CPU {b / n:.2f}x")
    print(f"sampled SHARDS estimates equal those of the run with the exact stacks: {same}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
