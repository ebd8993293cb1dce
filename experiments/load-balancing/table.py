#!/usr/bin/env python3
"""The load-balancing experiment's table: per workload and device setting, each balancer's
cache load (mean queue depth and utilisation of the cache device), backend load, mean and p99
latency, hit ratio and cache bytes written, with the ratios to plain write-back (wb).

Usage: python3 experiments/load-balancing/table.py results/load-balancing/results.jsonl
"""
import json
import sys


def main(path):
    rows = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("status") != "ok":
            print(f"point {r.get('point')} ({r.get('name')}): {r.get('status')}", file=sys.stderr)
            continue
        labels = dict(r["labels"])
        m = r["record"]["metrics"]
        cache, backend = m["devices"]["cache"], m["devices"]["backend"]
        rows[(r["workload"], labels["setting"], labels["balancer"])] = {
            "cache_qd": cache["mean_queue_depth"],
            "cache_util": cache["utilisation"],
            "backend_qd": backend["mean_queue_depth"],
            "mean_us": m["latency_us"]["all"]["mean"],
            "p99_us": m["latency_us"]["all"]["p99"],
            "hit": m["hit_ratio"],
            "cache_written": m["cache_bytes_written"],
            "bypassed": m["bypasses"].get("balancer-requests", 0),
        }
    if not rows:
        sys.exit("no successful point")
    print("| workload | setting | balancer | cache queue depth (× wb) | cache util | backend queue depth "
          "| mean latency µs (× wb) | p99 µs (× wb) | hit ratio | cache MiB written (× wb) | requests bypassed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (w, s, b), v in sorted(rows.items()):
        base = rows.get((w, s, "wb"))
        rel = lambda k: f" ({v[k] / base[k]:.2f})" if base and base[k] else ""
        print(f"| {w} | {s} | {b} | {v['cache_qd']:.1f}{rel('cache_qd')} | {v['cache_util']:.2f} "
              f"| {v['backend_qd']:.1f} | {v['mean_us']:.0f}{rel('mean_us')} | {v['p99_us']:.0f}{rel('p99_us')} "
              f"| {v['hit']:.3f} | {v['cache_written'] / 2**20:.0f}{rel('cache_written')} | {v['bypassed']} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/load-balancing/results.jsonl")
