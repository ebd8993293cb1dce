#!/usr/bin/env python3
"""Hit-ratio-only trace simulation: tiercache against libCacheSim on one oracleGeneral file.

For each policy, whole processes run interleaved, ROUNDS times (the order rotates each round):
`tiercache sim` (run.mode = "hit-ratio", fast replay, promotion always) and libCacheSim's C
simulation loop over its own reader (scripts/compare_libcachesim.py --time, PyPI
`libcachesim`), optionally an older tiercache binary too (--base). Both simulate the same file at
the same size, and their miss ratios must agree (checked; a mismatch is printed and fails).

`--policies belady` compares Belady's MIN: tiercache computes each line's next use itself (two
passes over the file, next uses spilled to temporary files), libCacheSim reads them from the
records.

Printed per policy: the miss ratio, each side's median and min-max CPU seconds (user + sys of the
whole process, from wait4: on a shared, busy machine wall time mostly measures waiting for a
core), each side's peak resident memory (ru_maxrss, the largest over the rounds), the ratio of medians libCacheSim / tiercache (>1: tiercache is faster), and the same with
libCacheSim's in-process loop time only (its Python start-up left out, which favours it), plus
wall-clock medians.

Usage: bench/hit_ratio_vs_libcachesim.py TRACE [--lines 350000] [--rounds 3]
       [--policies lru,fifo,clock,s3-fifo,sieve] [--bin target/release/tiercache] [--base OLD_BIN]
       [--sizes 35000,70000,175000,350000,700000 [--jobs 2]]

--sizes: many cache sizes instead of one. tiercache runs them as one `tiercache sweep` over
cache.capacity (points in parallel on --jobs cores, each on the batched path) and, for LRU, also
in one pass as `tiercache analyze --sizes` (the exact stack); libCacheSim runs them as its
multi-size mode does, one simulation per size in parallel (--jobs worker processes, each its C
loop over its own reader). Printed: wall and CPU seconds of each, ratios, and whether every
size's miss ratio agrees.

CAR, CLOCK-Pro, W-TinyLFU, LeCaR, LFUDA and LIRS are timed too, but their miss ratios are not
required to agree (each is defined differently from libCacheSim's, see crates/eviction/src:
LFUDA and LIRS follow the published algorithms, libCacheSim variants of them); libCacheSim's
Python package has no CAR, so CAR is timed against libCacheSim's ARC (the policy it
approximates; the "lcs as" column says which libCacheSim policy ran).

Make the trace with `cargo run --release -p tiercache --example zipf_oracle -- /tmp/z.oG
15000000 3500000 0.8` (15M requests, zipf 0.8 over 3.5M objects); 350000 lines is 10 % of them.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# libCacheSim policy timed against each tiercache policy whose name differs or is missing there.
LCS_COUNTERPART = {"car": "arc"}
# Policies whose miss ratio must equal libCacheSim's (the others are defined differently).
SAME_DEFINITION = {"lru", "fifo", "clock", "arc", "s3-fifo", "sieve", "belady", "slru", "2q", "lfu", "lru-k"}
# Policies whose libCacheSim decisions depend on object sizes in bytes: its ARC moves its target
# by one byte per ghost hit, not one object. The timed run keeps the file's byte sizes (its
# fastest path), so for these the miss ratio is checked on one more, untimed, libCacheSim run
# with unit sizes (compare_libcachesim.py's default), the policy tiercache simulates.
SIZE_DEPENDENT = {"arc"}
ROOT = os.path.dirname(HERE)

# Peak resident set (MiB) of the last process `run` waited for (ru_maxrss, KiB on Linux).
LAST_PEAK_MIB = [0.0]


def run(cmd):
    """Runs cmd; returns (stdout, wall seconds, CPU seconds of the process and its children).
    Its peak resident memory is left in LAST_PEAK_MIB[0]."""
    started = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - started
    LAST_PEAK_MIB[0] = usage.ru_maxrss / 1024
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {err.decode(errors='replace')}")
    return out.decode(), wall, usage.ru_utime + usage.ru_stime


def tiercache_config(trace, policy, lines, tmp):
    path = os.path.join(tmp, f"{policy}.toml")
    with open(path, "w") as f:
        f.write(
            f"name = '{policy}'\n[run]\nmode = 'hit-ratio'\n"
            f"[workload]\ntrace = '{trace}'\nformat = 'oracle-general'\nreplay = 'fast'\n"
            f"[cache]\ncapacity = {lines * 4096}\nline_size = 4096\neviction = '{policy}'\n"
            "promotion = { policy = 'always' }\n"
        )
    return path


def multi_size(args, trace, lcs_script, tmp):
    """The --sizes comparison; returns False when a miss ratio differs."""
    sizes = [int(x) for x in args.sizes.split(",")]
    ok = True
    print(f"{len(sizes)} sizes {sizes}, {args.jobs} jobs, {args.rounds} rounds")
    print(f"{'policy':8} {'side':28} {'wall s':>22} {'cpu s':>22}")
    for policy in args.policies.split(","):
        base = tiercache_config(trace, policy, sizes[0], tmp)
        spec = os.path.join(tmp, f"{policy}-sweep.toml")
        with open(spec, "w") as f:
            f.write(f"name = 'sizes-{policy}'\nbase = '{base}'\nrepetitions = 1\n"
                    f"[[axis]]\nkey = 'cache.capacity'\nvalues = {[n * 4096 for n in sizes]}\n")
        sides = {"tiercache sweep": ([], []), "libCacheSim (parallel sizes)": ([], [])}
        if policy == "lru":
            sides["tiercache analyze (one pass)"] = ([], [])
        miss = {}
        for r in range(args.rounds):
            names = list(sides)
            names = names[r % len(names):] + names[: r % len(names)]
            for name in names:
                if name == "tiercache sweep":
                    out_dir = os.path.join(tmp, f"sweep-{policy}-{r}")
                    _, wall, cpu = run([args.bin, "sweep", spec, "-o", out_dir, "-j", str(args.jobs)])
                    with open(os.path.join(out_dir, "results.jsonl")) as f:
                        for line in f:
                            rec = json.loads(line)
                            lines = rec["record"]["config"]["cache"]["capacity"] // 4096
                            miss.setdefault(lines, {})["sweep"] = 1.0 - rec["record"]["metrics"]["hit_ratio"]
                elif name == "tiercache analyze (one pass)":
                    out, wall, cpu = run([args.bin, "analyze", trace, "--format", "oracle-general",
                                          "--sizes", args.sizes, "--json"])
                    for p in json.loads(out)["curve"]:
                        miss.setdefault(p["lines"], {})["analyze"] = p["miss_ratio"]
                else:
                    out, wall, cpu = run([sys.executable, lcs_script, trace, "--sizes", args.sizes,
                                          "--policies", policy, "--bytes", "--parallel",
                                          str(args.jobs)])
                    for lines, v in json.loads(out)["policies"][policy].items():
                        miss.setdefault(int(lines), {})["libcachesim"] = v["miss_ratio"]
                sides[name][0].append(wall)
                sides[name][1].append(cpu)
        lcs_wall = med(sides["libCacheSim (parallel sizes)"][0])
        lcs_cpu = med(sides["libCacheSim (parallel sizes)"][1])
        for name, (wall, cpu) in sides.items():
            ratio = "" if name.startswith("libCacheSim") else \
                f"  libCacheSim/this: wall {lcs_wall / med(wall):.2f}, cpu {lcs_cpu / med(cpu):.2f}"
            print(f"{policy:8} {name:28} {span(wall):>22} {span(cpu):>22}{ratio}")
        for lines, m in sorted(miss.items()):
            if any(abs(v - m["libcachesim"]) > 1e-6 for v in m.values()):
                ok = False
                print(f"  MISS RATIOS DIFFER at {lines} lines: {m}")
        print(f"{policy:8} miss ratios per size agree: "
              f"{all(all(abs(v - m['libcachesim']) <= 1e-6 for v in m.values()) for m in miss.values())}",
              flush=True)
    return ok


def med(xs):
    return statistics.median(xs)


def span(xs):
    return f"{med(xs):6.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--lines", type=int, default=350_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--policies", default="lru,fifo,clock,s3-fifo,sieve")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/tiercache"))
    ap.add_argument("--base", help="an older tiercache binary to time alongside")
    ap.add_argument("--sizes", help="many sizes (lines, comma separated): the multi-size comparison")
    ap.add_argument("--jobs", type=int, default=2, help="parallel sizes (--sizes)")
    args = ap.parse_args()
    trace = os.path.abspath(args.trace)
    requests = os.path.getsize(trace) // 24
    lcs_script = os.path.join(ROOT, "scripts/compare_libcachesim.py")
    sides = [("tiercache", args.bin)] + ([("base", args.base)] if args.base else [])
    failed = False
    if args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            sys.exit(0 if multi_size(args, trace, lcs_script, tmp) else 1)
    print(f"trace {trace}: {requests} requests, cache {args.lines} lines, {args.rounds} rounds")
    header = (f"{'policy':8} {'miss ratio':>10} | {'tiercache cpu s':>22} | {'libCacheSim cpu s':>22} |"
              f" {'ratio':>5} {'loop':>5} | {'wall tc':>7} {'wall lcs':>8} | {'peak MiB tc':>11} {'lcs':>7}")
    if args.base:
        header += f" | {'base cpu s':>22} {'new/base':>8}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for policy in args.policies.split(","):
            cfg = tiercache_config(trace, policy, args.lines, tmp)
            times = {name: ([], []) for name, _ in sides}
            lcs_cpu, lcs_wall, lcs_loop = [], [], []
            peak = {"tiercache": 0.0, "libcachesim": 0.0}
            miss = {}
            for r in range(args.rounds):
                jobs = [("libcachesim", None)] + sides
                jobs = jobs[r % len(jobs):] + jobs[: r % len(jobs)]
                for name, binary in jobs:
                    if name == "libcachesim":
                        lcs_name = LCS_COUNTERPART.get(policy, policy)
                        out, wall, cpu = run([sys.executable, lcs_script, trace, "--sizes",
                                              str(args.lines), "--policies", lcs_name,
                                              "--bytes", "--time"])
                        j = json.loads(out)
                        lcs_cpu.append(cpu)
                        lcs_wall.append(wall)
                        lcs_loop.append(j.get("cpu_seconds", j["seconds"]))
                        miss["libcachesim"] = j["miss_ratio"]
                        peak["libcachesim"] = max(peak["libcachesim"], LAST_PEAK_MIB[0])
                    else:
                        out, wall, cpu = run([binary, "sim", cfg, "--json"])
                        m = json.loads(out.splitlines()[0])["metrics"]
                        times[name][0].append(cpu)
                        times[name][1].append(wall)
                        miss[name] = 1.0 - m["hit_ratio"]
                        if name == "tiercache":
                            peak["tiercache"] = max(peak["tiercache"], LAST_PEAK_MIB[0])
            timed_lcs = miss["libcachesim"]
            if policy in SIZE_DEPENDENT:
                out, _, _ = run([sys.executable, lcs_script, trace, "--sizes", str(args.lines),
                                 "--policies", policy])
                miss["libcachesim"] = json.loads(out)["policies"][policy][str(args.lines)]["miss_ratio"]
            agree = all(abs(v - miss["libcachesim"]) < 1e-6 for v in miss.values())
            if policy in SAME_DEFINITION:
                failed |= not agree
            tc_cpu, tc_wall = times["tiercache"]
            line = (f"{policy:8} {miss['tiercache']:10.7f} | {span(tc_cpu):>22} | {span(lcs_cpu):>22} |"
                    f" {med(lcs_cpu) / med(tc_cpu):5.2f} {med(lcs_loop) / med(tc_cpu):5.2f} |"
                    f" {med(tc_wall):7.2f} {med(lcs_wall):8.2f} |"
                    f" {peak['tiercache']:11.0f} {peak['libcachesim']:7.0f}")
            if args.base:
                b_cpu = times["base"][0]
                line += f" | {span(b_cpu):>22} {med(b_cpu) / med(tc_cpu):8.2f}"
            if policy not in SAME_DEFINITION:
                line += (f"  (libCacheSim {LCS_COUNTERPART.get(policy, policy)}: miss ratio "
                         f"{miss['libcachesim']:.7f}, defined differently)")
            elif not agree:
                line += f"  MISS RATIOS DIFFER: {miss}"
            elif policy in SIZE_DEPENDENT:
                line += (f"  (libCacheSim with unit sizes agrees; its timed run, byte sizes: "
                         f"{timed_lcs:.7f})")
            print(line, flush=True)
    print("ratio: libCacheSim process CPU / tiercache process CPU (medians); loop: libCacheSim's "
          "in-process simulation loop CPU / tiercache process CPU; new/base: base CPU / new CPU")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
