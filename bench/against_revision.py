#!/usr/bin/env python3
"""Runs one cargo example built at a base revision and at the working tree, interleaved, and
prints per-figure medians and the median of the per-round ratios (new / base).

The machines this runs on are shared and noisy: the two binaries alternate round by round, so
both see the same conditions, and only the ratio is meant to be quoted.

    python3 bench/against_revision.py --base a0256e8 --package tiercache-sim \\
        --example sim_throughput --example-from-head --from-head crates/sim/src/testing.rs \\
        --from-head crates/core/src/source.rs --metric timed --rounds 7 -- 2000000 nohost all
    python3 bench/against_revision.py --base a0256e8 --package tiercache-policy \\
        --example clean_victim --metric clean_victim --rounds 3 -- 4096 200000

The base is checked out in a git worktree under the target directory and built there with
its own target directory (files taken into it from the working tree are restored from the
base revision first, so each run starts from the base as committed). The example's source is taken from the working tree when the base
does not have it (or `--example-from-head` is given), so a new benchmark can measure old code
through the public API it uses; the build fails loudly if that API did not exist.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

METRICS = {
    # label: the figure's name; value: a rate (higher is better) unless said otherwise.
    "timed": r"^(?P<label>timed simulation|hit-ratio-only):.*= (?P<value>[0-9.]+) M requests/s",
    "clean_victim": r"^(?P<label>\S+)\s+(?P<value>[0-9.]+) M misses/s",
    # The engine's request path (crates/engine/examples/request_path_cost.rs), per hit: a
    # time, so here new / base below 1 is faster.
    "request_path": r"^\s+(?P<label>engine: \S+ \S+)[^\n]*?(?P<value>[0-9.]+) ns/op",
    # The policy core alone (crates/policy/examples/hit_ratio_throughput.rs).
    "hit_ratio_throughput": r"(?P<label>requests_per_s)=(?P<value>[0-9.]+)",
}


def run(cmd, cwd=None, env=None):
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        sys.exit(f"failed ({res.returncode}): {' '.join(cmd)}")
    return res.stdout


def build(tree, target, package, example):
    env = dict(os.environ, CARGO_TARGET_DIR=target, CARGO_INCREMENTAL="0")
    run(["cargo", "build", "--release", "-q", "-p", package, "--example", example], cwd=tree, env=env)
    path = os.path.join(target, "release", "examples", example)
    if not os.path.exists(path):
        sys.exit(f"built, but {path} is missing")
    return path


def example_source(tree, package, example):
    """Path of the example's source in `tree` (examples/NAME.rs of the package's crate)."""
    meta = run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=tree)
    for p in json.loads(meta)["packages"]:
        if p["name"] == package:
            for t in p["targets"]:
                if t["name"] == example and "example" in t["kind"]:
                    return t["src_path"]
    sys.exit(f"{package} has no example {example} in {tree}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="git revision to compare against")
    ap.add_argument("--package", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--metric", required=True, choices=sorted(METRICS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--example-from-head", action="store_true",
                    help="build the working tree's example source against the base")
    ap.add_argument("--from-head", action="append", default=[], metavar="PATH",
                    help="also take this file from the working tree into the base (the "
                         "benchmark's workload definition, say), repeatable")
    ap.add_argument("args", nargs="*", help="arguments passed to the example (after --)")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    root = run(["git", "rev-parse", "--show-toplevel"]).strip()
    rev = run(["git", "rev-parse", "--verify", a.base + "^{commit}"], cwd=root).strip()
    target_root = os.path.join(root, "target", "against-revision")
    tree = os.path.join(target_root, "tree-" + rev[:12])
    if not os.path.exists(tree):
        os.makedirs(target_root, exist_ok=True)
        run(["git", "worktree", "add", "--detach", "-f", tree, rev], cwd=root)
    # The base as committed: files an earlier run took into it are put back or removed.
    run(["git", "checkout", "-q", "-f", rev, "--", "."], cwd=tree)
    run(["git", "clean", "-fdq"], cwd=tree)
    head_src = example_source(root, a.package, a.example)
    rel = os.path.relpath(head_src, root)
    base_src = os.path.join(tree, rel)
    if a.example_from_head or not os.path.exists(base_src):
        os.makedirs(os.path.dirname(base_src), exist_ok=True)
        shutil.copyfile(head_src, base_src)
        print(f"base: {rev[:12]} with the working tree's {rel}")
    else:
        print(f"base: {rev[:12]}")
    for path in a.from_head:
        src = os.path.join(root, path)
        if not os.path.isfile(src):
            sys.exit(f"--from-head {path}: no such file in the working tree")
        dst = os.path.join(tree, path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        print(f"base: with the working tree's {path}")
    base_bin = build(tree, os.path.join(target_root, "target-" + rev[:12]), a.package, a.example)
    new_bin = build(root, os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")),
                    a.package, a.example)
    pat = re.compile(METRICS[a.metric], re.M)

    def figures(binary):
        out = run([binary] + a.args)
        found = {m["label"]: float(m["value"]) for m in pat.finditer(out)}
        if not found:
            sys.stderr.write(out)
            sys.exit(f"{binary}: no figure matched the {a.metric} pattern")
        return found

    rounds = []
    for r in range(a.rounds):
        # Alternate which runs first, so neither always gets the warmer machine.
        if r % 2 == 0:
            b, n = figures(base_bin), figures(new_bin)
        else:
            n, b = figures(new_bin), figures(base_bin)
        if b.keys() != n.keys():
            sys.exit(f"round {r + 1}: figures differ: {sorted(b)} vs {sorted(n)}")
        rounds.append((b, n))
        print(f"round {r + 1}: " + ", ".join(f"{k} {b[k]:g} -> {n[k]:g}" for k in b))
    print(f"\n{'figure':<20} {'base':>10} {'new':>10} {'new/base':>9}  (medians of {a.rounds} rounds)")
    for k in rounds[0][0]:
        base = statistics.median(b[k] for b, _ in rounds)
        new = statistics.median(n[k] for _, n in rounds)
        ratios = [n[k] / b[k] for b, n in rounds if b[k] > 0]
        ratio = f"{statistics.median(ratios):>9.2f}" if ratios else f"{'n/a':>9}"
        print(f"{k:<20} {base:>10.3f} {new:>10.3f} {ratio}")


if __name__ == "__main__":
    main()
