#!/usr/bin/env python3
"""The load-balancing experiment's table: per workload and device setting, each balancer's
cache load (mean queue depth and utilisation of the cache device), backend load, mean and p99
latency, hit ratio and cache bytes written, with the ratios to plain write-back (wb); then,
per point, the measured window's mean cache and backend queue times (from the timeline),
the bytes written back to the backend, the backend's ops (and those of cleaning jobs), and how often the balancer changed the policy in force.

A sweep with a cleaning-order axis (`order` label, `cache.cleaning_order`) gets one group per
setting and order; ratios are to wb of the same group.

Usage: python3 experiments/load-balancing/table.py results/load-balancing/results.jsonl
"""
import json
import sys


def timeline_figures(timeline):
    """Mean cache and backend queue times (µs) over the measured intervals, and the number
    of changes of the balancer's policy in force."""
    measured = [t for t in timeline if not t.get("warmup")]
    if not measured:
        return 0.0, 0.0, 0
    cache_q = sum(t.get("cache_qtime_us", 0.0) for t in measured) / len(measured)
    backend_q = sum(t.get("backend_qtime_us", 0.0) for t in measured) / len(measured)
    policies = [t.get("balancer_policy", 0) for t in measured]
    switches = sum(1 for a, b in zip(policies, policies[1:]) if a != b)
    return cache_q, backend_q, switches


def main(path):
    rows = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("status") != "ok":
            print(f"point {r.get('point')} ({r.get('name')}): {r.get('status')}", file=sys.stderr)
            continue
        labels = dict(r["labels"])
        setting = labels.get("setting", r["record"]["config"]["devices"]["backend"])
        if "order" in labels:
            setting = f"{setting}, {labels['order']} order"
        m = r["record"]["metrics"]
        cache, backend = m["devices"]["cache"], m["devices"]["backend"]
        cache_q, backend_q, switches = timeline_figures(r["record"].get("timeline") or [])
        rows[(r["workload"], setting, labels["balancer"])] = {
            "cache_qd": cache["mean_queue_depth"],
            "cache_util": cache["utilisation"],
            "backend_qd": backend["mean_queue_depth"],
            "mean_us": m["latency_us"]["all"]["mean"],
            "p99_us": m["latency_us"]["all"]["p99"],
            "hit": m["hit_ratio"],
            "cache_written": m["cache_bytes_written"],
            "bypassed": m["bypasses"].get("balancer-requests", 0),
            "cache_q": cache_q,
            "backend_q": backend_q,
            "written_back": m["written_back_bytes"],
            "backend_ops": backend["ops"],
            "clean_ops": backend.get("ops_by_cause", {}).get("clean", 0),
            "switches": switches,
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
    print()
    print("| workload | setting | balancer | mean cache queue time µs | mean backend queue time µs "
          "| MiB written back | backend ops (of them cleaning) | policy changes |")
    print("|---|---|---|---|---|---|---|---|")
    for (w, s, b), v in sorted(rows.items()):
        print(f"| {w} | {s} | {b} | {v['cache_q']:.0f} | {v['backend_q']:.0f} "
              f"| {v['written_back'] / 2**20:.1f} | {v['backend_ops']} ({v['clean_ops']}) | {v['switches']} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/load-balancing/results.jsonl")
