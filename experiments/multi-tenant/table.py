#!/usr/bin/env python3
"""The multi-tenant experiment's tables, from the sweep's records.

Overall, per cache size and tenancy mode: mean allocated cache, hit ratio, mean latency, IOPS,
cache bytes written, IOPS per dollar of allocated cache and the cache device's projected
lifetime, each with its ratio to `shared` at the same size. Then per volume (the largest cache
size unless --size is given): each mode's allocation, hit ratio, mean latency, cache bytes
written and share of time read-only.

With the records of `sweep-paper.toml` (its workloads are the loops `open` and `closed`), the
tables of the experiment as the ECI-Cache paper ran it instead: one per loop, open loop
(volumes replayed by their own times) first, closed loop second. Per tenancy mode: mean
allocated cache, overall hit ratio, mean latency over every request, cache bytes written, the
cache device's projected lifetime at that write rate, and IOPS per dollar as the median over
volumes of each volume's own IOPS divided by the cost of its own allocation (under `shared` a
volume has no partition: it is charged an equal share of the cache, as under `static`; a volume
given no cache costs nothing and is left out; the median, since a volume given a sliver of
cache has an enormous ratio that would swamp a mean). Then per volume and mode: allocation, hit
ratio, mean latency, cache writes, own IOPS, own IOPS per dollar, and the intervals its
allocation took to settle (`*`: still moving at the end of the run).

Usage: python3 experiments/multi-tenant/table.py results/multi-tenant/results.jsonl [--size 32MiB]
       python3 experiments/multi-tenant/table.py results/multi-tenant-paper/results.jsonl
"""
import json
import sys

MODES = ["shared", "static", "trd", "eci"]


LOOPS = ["open", "closed"]
MIB = 2**20


def volume_ipd(t, vol, n_volumes):
    """IOPS per dollar of one volume from its own throughput and its own allocation's cost;
    None for a volume that was given no cache (it costs nothing)."""
    x = t["volumes"][vol]
    if x.get("cost_usd", 0) > 0:
        return x["iops"] / x["cost_usd"]
    if t.get("mode") == "shared" and t.get("cost_usd", 0) > 0:
        return x["iops"] / (t["cost_usd"] / n_volumes)
    return None


def median(xs):
    if not xs:
        return None
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def fmt_ipd(v):
    return "-" if v is None else f"{v:,.0f}"


def paper_main(path):
    runs, names = {}, {}
    for line in open(path):
        r = json.loads(line)
        if r.get("status") != "ok":
            print(f"point {r.get('point')} ({r.get('name')}): {r.get('status')}", file=sys.stderr)
            continue
        runs[(r["workload"], dict(r["labels"])["mode"])] = r["record"]["metrics"]
        for i, v in enumerate(r["record"]["config"].get("volumes", [])):
            names[str(v.get("id", i))] = v.get("name", str(i))
    if not runs:
        sys.exit("no successful point")
    for loop in LOOPS:
        modes = [m for m in MODES if (loop, m) in runs]
        if not modes:
            continue
        title = "open loop (each volume at its own times)" if loop == "open" else \
            "closed loop (each volume at its queue depth)"
        print(f"### {title}\n")
        print("| mode | allocated MiB | hit ratio | mean latency µs | IOPS | cache MiB written "
              "| lifetime days (device of the cache's size) | IOPS per $ (median of volumes) |")
        print("|---|---|---|---|---|---|---|---|")
        for mode in modes:
            m = runs[(loop, mode)]
            t = m.get("tenancy") or {}
            vols = t.get("volumes") or {}
            ipd = [x for x in (volume_ipd(t, v, len(vols)) for v in vols) if x is not None]
            life = t.get("projected_lifetime_days")
            life = f"{life:.3g}" if life is not None else "-"
            print(f"| {mode} | {t.get('allocated_bytes_mean', 0) / MIB:.1f} | {m['hit_ratio']:.3f} "
                  f"| {m['latency_us']['all']['mean']:,.0f} | {m['iops']:,.0f} "
                  f"| {m['cache_bytes_written'] / MIB:,.0f} | {life} "
                  f"| {fmt_ipd(median(ipd))} |")
        print()
        print("Per volume: allocated MiB / hit ratio / mean latency µs / cache MiB written / IOPS / "
              "IOPS per $ / intervals to settle\n")
        print("| volume | " + " | ".join(modes) + " |")
        print("|---|" + "---|" * len(modes))
        vols = sorted({v for mode in modes
                       for v in ((runs[(loop, mode)].get("tenancy") or {}).get("volumes") or {})},
                      key=int)
        for vol in vols:
            cells = []
            for mode in modes:
                t = runs[(loop, mode)].get("tenancy") or {}
                x = (t.get("volumes") or {}).get(vol)
                if x is None:
                    cells.append("-")
                    continue
                s = x.get("settling")
                settle = "-" if s is None else \
                    f"{s['intervals_to_settle']}{'' if s['settled'] else '*'}"
                cells.append(f"{x['allocated_bytes_mean'] / MIB:.1f} / {x['hit_ratio']:.3f} / "
                             f"{x['mean_latency_us']:,.0f} / {x['cache_bytes_written'] / MIB:,.0f} / "
                             f"{x['iops']:,.0f} / {fmt_ipd(volume_ipd(t, vol, len(t['volumes'])))} / "
                             f"{settle}")
            print(f"| {names.get(vol, vol)} | " + " | ".join(cells) + " |")
        print()


def size_key(s):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if s.endswith(u):
            return float(s[: -len(u)]) * m
    return float(s)


def is_paper(path):
    """Whether the records are `sweep-paper.toml`'s (its workloads are the loops)."""
    for line in open(path):
        return json.loads(line).get("workload") in LOOPS
    return False


def main(path, size=None):
    if is_paper(path):
        return paper_main(path)
    runs = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("status") != "ok":
            print(f"point {r.get('point')} ({r.get('name')}): {r.get('status')}", file=sys.stderr)
            continue
        labels = dict(r["labels"])
        runs[(labels["cache"], labels["mode"])] = r["record"]["metrics"]
    if not runs:
        sys.exit("no successful point")
    names = {}
    for line in open(path):
        r = json.loads(line)
        for i, v in enumerate(r["record"]["config"].get("volumes", [])):
            names[str(v.get("id", i))] = v.get("name", str(i))
        break
    sizes = sorted({s for s, _ in runs}, key=size_key)

    print("| cache | mode | allocated MiB (× shared) | hit ratio (× shared) | mean latency µs (× shared) "
          "| IOPS (× shared) | cache MiB written (× shared) | IOPS per $ (× shared) | lifetime days |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        base = runs.get((s, "shared"))
        for mode in MODES:
            m = runs.get((s, mode))
            if m is None:
                continue
            t = m.get("tenancy") or {}
            bt = (base or {}).get("tenancy") or {}
            v = {
                "alloc": t.get("allocated_bytes_mean", 0) / 2**20,
                "hit": m["hit_ratio"],
                "lat": m["latency_us"]["all"]["mean"],
                "iops": m["iops"],
                "written": m["cache_bytes_written"] / 2**20,
                "ipd": t.get("iops_per_dollar", 0),
            }
            b = {
                "alloc": bt.get("allocated_bytes_mean", 0) / 2**20,
                "hit": base["hit_ratio"] if base else 0,
                "lat": base["latency_us"]["all"]["mean"] if base else 0,
                "iops": base["iops"] if base else 0,
                "written": base["cache_bytes_written"] / 2**20 if base else 0,
                "ipd": bt.get("iops_per_dollar", 0),
            }
            rel = lambda k: f" ({v[k] / b[k]:.2f})" if b[k] else ""
            life = t.get("projected_lifetime_days")
            life = f"{life:.3g}" if life is not None else "-"
            print(f"| {s} | {mode} | {v['alloc']:.1f}{rel('alloc')} | {v['hit']:.3f}{rel('hit')} "
                  f"| {v['lat']:.0f}{rel('lat')} | {v['iops']:.0f}{rel('iops')} "
                  f"| {v['written']:.0f}{rel('written')} | {v['ipd']:,.0f}{rel('ipd')} | {life} |")

    s = size or sizes[-1]
    print()
    print(f"Per volume, {s} cache: allocated MiB / hit ratio / mean latency µs / cache MiB written / share of time read-only")
    print()
    print("| volume | " + " | ".join(m for m in MODES if (s, m) in runs) + " |")
    print("|---|" + "---|" * sum((s, m) in runs for m in MODES))
    vols = sorted({v for m in MODES if (s, m) in runs
                   for v in ((runs[(s, m)].get("tenancy") or {}).get("volumes") or {})}, key=int)
    for vol in vols:
        cells = []
        for mode in MODES:
            if (s, mode) not in runs:
                continue
            x = ((runs[(s, mode)].get("tenancy") or {}).get("volumes") or {}).get(vol)
            if x is None:
                cells.append("-")
                continue
            cells.append(f"{x['allocated_bytes_mean'] / 2**20:.1f} / {x['hit_ratio']:.3f} / "
                         f"{x['mean_latency_us']:.0f} / {x['cache_bytes_written'] / 2**20:.0f} / "
                         f"{x['read_only_share']:.2f}")
        print(f"| {names.get(vol, vol)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    args = sys.argv[1:]
    size = None
    if "--size" in args:
        i = args.index("--size")
        size = args[i + 1]
        del args[i : i + 2]
    main(args[0] if args else "results/multi-tenant/results.jsonl", size)
