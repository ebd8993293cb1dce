#!/usr/bin/env python3
"""Runs two builds of one benchmark (two binaries) round by round, alternating which goes
first, and prints each figure's median per build and the median of the per-round ratios
(second / first). Figures are the `name=value` pairs of the lines the binaries print, keyed by
the line's first word (`read_hit iops=... p99_ns=...` gives `read_hit iops` and
`read_hit p99_ns`).

    python3 bench/interleave.py --rounds 9 BASE_BINARY NEW_BINARY -- 300000 128

Unlike `against_revision.py` it builds nothing: the binaries are built by the caller (say, the
base revision's tree with the same target directory, the binary copied out before the working
tree's build replaces it), so no second dependency build is needed.
"""

import argparse
import re
import statistics
import subprocess
import sys

PAIR = re.compile(r"(\w+)=([0-9.]+)")


def figures(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stdout + out.stderr)
        sys.exit(f"{binary} failed ({out.returncode})")
    found = {}
    for line in out.stdout.splitlines():
        words = line.split()
        for name, value in PAIR.findall(line):
            found[f"{words[0]} {name}"] = float(value)
    if not found:
        sys.exit(f"{binary}: printed no name=value figures")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("args", nargs="*", help="arguments passed to both (after --)")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    rounds = []
    for r in range(a.rounds):
        if r % 2 == 0:
            b, n = figures(a.base, a.args), figures(a.new, a.args)
        else:
            n, b = figures(a.new, a.args), figures(a.base, a.args)
        if b.keys() != n.keys():
            sys.exit(f"round {r + 1}: figures differ: {sorted(b)} vs {sorted(n)}")
        rounds.append((b, n))
        print(f"round {r + 1}: " + ", ".join(f"{k} {b[k]:g} -> {n[k]:g}" for k in b), flush=True)
    print(f"\n{'figure':<24} {'base':>12} {'new':>12} {'new/base':>9}  (medians of {a.rounds} rounds)")
    for k in rounds[0][0]:
        base = statistics.median(b[k] for b, _ in rounds)
        new = statistics.median(n[k] for _, n in rounds)
        ratios = [n[k] / b[k] for b, n in rounds if b[k] > 0]
        ratio = f"{statistics.median(ratios):>9.3f}" if ratios else f"{'n/a':>9}"
        print(f"{k:<24} {base:>12.1f} {new:>12.1f} {ratio}")


if __name__ == "__main__":
    main()
