#!/usr/bin/env python3
"""Writes the two generated traces of the "how far from optimal" table (docs/design.md §12) as
MSR Cambridge CSV, deterministically (fixed seeds):

- `zipf`: reads and writes (30 %) of single 4 KiB blocks, zipf 0.9 over 500,000 blocks;
- `mix`: a larger mix of three volumes: a zipf 0.8 hot set (60 % of requests, 25 % writes,
  4–16 KiB), sequential scans of 64 KiB requests (25 %, reads) and uniform random 8 KiB
  writes and reads (15 %, half writes) over a 16 GiB range.

    python3 bench/opt_table_traces.py OUT_DIR [--zipf-requests N] [--mix-requests N]

Then, for each trace, the table (per policy, miss ratio at 1/5/10/30 % of the footprint, OPT,
and the write-back bound at read and write weights 1,1):

    tiercache analyze TRACE --sizes 1%,5%,10%,30% --opt --writeback-cost 1,1 \\
        --policies fifo,clock,arc,s3-fifo,sieve --minisim-rate 1
"""

import argparse
import os

import numpy as np

# Windows FILETIME of 2007-02-22, as the MSR traces start; 100 ns units.
BASE = 128_166_385_295_514_663


def zipf_ranks(rng, n_items, theta, size):
    """Ranks 0.. of `size` draws from zipf(theta) over `n_items` (inverse CDF)."""
    weights = 1.0 / np.power(np.arange(1, n_items + 1, dtype=np.float64), theta)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.searchsorted(cdf, rng.random(size), side="right")


def scatter(ranks, n_items):
    """Spreads ranks over the block range so hot blocks are not neighbours."""
    return (ranks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15 % (1 << 63))) % np.uint64(n_items)


def write_csv(path, times, hosts, is_write, offsets, sizes):
    with open(path, "w") as f:
        for t, h, w, o, s in zip(times, hosts, is_write, offsets, sizes):
            f.write(f"{BASE + int(t)},{h},0,{'Write' if w else 'Read'},{int(o)},{int(s)},100\n")


def make_zipf(path, n):
    rng = np.random.default_rng(35)
    blocks = 500_000
    b = scatter(zipf_ranks(rng, blocks, 0.9, n), blocks)
    writes = rng.random(n) < 0.3
    times = np.arange(n, dtype=np.int64) * 100
    write_csv(path, times, ["zipf"] * n, writes, b * 4096, np.full(n, 4096))


def make_mix(path, n):
    rng = np.random.default_rng(36)
    kind = rng.choice(3, size=n, p=[0.60, 0.25, 0.15])
    hosts = np.array(["hot", "scan", "rand"])[kind]
    offsets = np.zeros(n, dtype=np.uint64)
    sizes = np.zeros(n, dtype=np.int64)
    writes = np.zeros(n, dtype=bool)
    # Hot set: zipf 0.8 over 400,000 16 KiB extents, 4-16 KiB requests.
    hot = kind == 0
    k = int(hot.sum())
    ext = scatter(zipf_ranks(rng, 400_000, 0.8, k), 400_000)
    sizes[hot] = 4096 * rng.integers(1, 5, size=k)
    offsets[hot] = ext * np.uint64(16384)
    writes[hot] = rng.random(k) < 0.25
    # Scans: 64 KiB reads, each scan 256 requests long from a random start in 64 GiB.
    scan = kind == 1
    k = int(scan.sum())
    idx = np.arange(k)
    starts = rng.integers(0, (64 << 30) // 65536 - 256, size=k // 256 + 1)
    offsets[scan] = (starts[idx // 256] + idx % 256).astype(np.uint64) * np.uint64(65536)
    sizes[scan] = 65536
    # Uniform random 8 KiB over 16 GiB, half writes.
    rnd = kind == 2
    k = int(rnd.sum())
    offsets[rnd] = rng.integers(0, (16 << 30) // 8192, size=k).astype(np.uint64) * np.uint64(8192)
    sizes[rnd] = 8192
    writes[rnd] = rng.random(k) < 0.5
    times = np.arange(n, dtype=np.int64) * 50
    write_csv(path, times, hosts, writes, offsets, sizes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--zipf-requests", type=int, default=2_000_000)
    ap.add_argument("--mix-requests", type=int, default=5_000_000)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    make_zipf(os.path.join(a.out_dir, "zipf.csv"), a.zipf_requests)
    make_mix(os.path.join(a.out_dir, "mix.csv"), a.mix_requests)


if __name__ == "__main__":
    main()
