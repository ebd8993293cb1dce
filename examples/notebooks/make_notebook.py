import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# tiercache from Python: a trace, its curves, a small sweep

A starting point for cache studies in Python. It loads a block trace into Arrow and pandas,
plots its miss-ratio curve (MRC) and its reuse-distance curves (TRD, URD), runs a small
design sweep on the trace with the simulator, and plots the results.

Everything here runs the tiercache library, the code the `tiercache` command runs: the same
config gives the same record as `tiercache sim --json`.

Set `TIERCACHE_TRACE` to your own trace (MSR, vSCSI, SPC, FIU, Tencent, Alibaba, SYSTOR,
blkparse, fio iolog, oracleGeneral, native; compressed or not). Without it the notebook uses
the repository's MSR sample (`fixtures/traces/msr-hm0-sample.csv`), or makes a small synthetic
MSR-format trace.
""")

code("""
import os, tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt

import tiercache

print("tiercache", tiercache.__version__)
work = Path(tempfile.mkdtemp(prefix="tiercache-notebook-"))
""")

code("""
def synthetic_msr(path, n=20_000, seed=1):
    \"\"\"A small MSR-format trace: zipf-distributed 4 KiB-aligned reads and writes.\"\"\"
    rng = np.random.default_rng(seed)
    blocks = rng.zipf(1.2, n) % 50_000
    t0 = 128166385295514663
    with open(path, "w") as f:
        for i, b in enumerate(blocks):
            op = "Write" if rng.random() < 0.3 else "Read"
            f.write(f"{t0 + i * 1000},syn,0,{op},{int(b) * 4096},4096,100\\n")
    return path

# Jupyter runs a notebook in its own directory: the fixture is two levels up.
candidates = [os.environ.get("TIERCACHE_TRACE"), "../../fixtures/traces/msr-hm0-sample.csv"]
TRACE = next((c for c in candidates if c and Path(c).exists()), None) or synthetic_msr(work / "synthetic.csv")
print("trace:", TRACE)
""")

md("""
## Load the trace

`read_trace` returns an Arrow table (`iter_trace` yields record batches for traces larger
than memory). Times are ns since the first record, offsets and lengths in bytes.
""")

code("""
table = tiercache.read_trace(TRACE)
df = table.to_pandas()
print(table.schema)
print(f"{len(df):,} requests, {df['volume'].nunique()} volume(s)")
df.head()
""")

code("""
mix = df.groupby("op", observed=True).agg(requests=("length", "size"), bytes=("length", "sum"))
mix
""")

md("""
## Miss-ratio curve and reuse distances

`analyze` computes the exact LRU miss-ratio curve in one pass (overall, reads, writes), the
traditional reuse distance (TRD) and the useful reuse distance (URD: reuses that would be
hits worth caching, i.e. reads after reads or writes) and per-volume sizing and
write-policy advice.
""")

code("""
a = tiercache.analyze(TRACE, line_size=4096)
a.mrc.head()
""")

code("""
fig, ax = plt.subplots(1, 2, figsize=(11, 4))
mrc = a.mrc
ax[0].plot(mrc["bytes"] / 2**20, mrc["miss_ratio"], marker="o", label="all")
ax[0].plot(mrc["bytes"] / 2**20, mrc["read_miss_ratio"], marker=".", label="reads")
ax[0].plot(mrc["bytes"] / 2**20, mrc["write_miss_ratio"], marker=".", label="writes")
ax[0].set_xscale("log", base=2)
ax[0].set_xlabel("cache size (MiB)")
ax[0].set_ylabel("LRU miss ratio")
ax[0].set_title("Miss-ratio curve")
ax[0].legend()

r = a.reuse
ax[1].step(r["distance_lines"], r["trd_cdf"], where="post", label="TRD (all reuses)")
ax[1].step(r["distance_lines"], r["urd_cdf"], where="post", label="URD (useful read reuses)")
ax[1].set_xscale("log", base=2)
ax[1].set_xlabel("reuse distance (4 KiB lines)")
ax[1].set_ylabel("share of reuses ≤ distance")
ax[1].set_title("Reuse-distance CDFs")
ax[1].legend()
plt.tight_layout()
""")

code("""
a.advice[["volume", "footprint_lines", "urd_demand_lines", "trd_demand_lines", "urd_knee_lines", "write_reuse_share", "write_policy"]]
""")

md("""
## One simulation

`run` takes TOML text, a dict or a path, and returns the records `tiercache sim --json`
prints; `.to_pandas()` flattens them.
""")

code("""
config = {
    "run": {"mode": "hit-ratio"},
    "workload": {"trace": str(TRACE)},
    "cache": {"capacity": "4MiB", "line_size": "4KiB"},
}
runs = tiercache.run(config)
runs.to_pandas()[["name", "metrics.requests", "metrics.hit_ratio", "metrics.promotions", "metrics.cache_bytes_written"]]
""")

md("""
## A small sweep

A sweep spec crosses axes over any config key. The same spec runs with
`tiercache sweep SPEC`, on a Ray cluster with `--ray` (or `tiercache.sweep(..., ray="auto")`),
and `tiercache tune SPEC` searches it instead of enumerating it.
""")

code("""
spec = work / "sweep.toml"
spec.write_text(f'''
name = "notebook"
[base.run]
mode = "timed"
seed = 1
[base.workload]
trace = "{TRACE}"
replay = "fast"
jobs = 4
iodepth = 4
[base.cache]
capacity = "4MiB"
[base.devices]
cache = "ram-disk"
backend = "sata-ssd-5100"

[[axis]]
key = "cache.capacity"
values = ["1MiB", "4MiB", "16MiB", "64MiB"]

[[axis]]
name = "promotion"
key = "cache.promotion"
values = [{{ policy = "always" }}, {{ policy = "nhit", n = 2 }}]
labels = ["always", "nhit-2"]
''')
result = tiercache.sweep(spec, work / "results", progress=False)
print(result.summary)
res = result.results
res[["name", "metrics.hit_ratio", "metrics.iops", "metrics.latency_us.all.p99"]]
""")

code("""
res["capacity_mib"] = res["name"].str.extract(r"capacity=(\\d+)MiB").astype(float)
res["promotion"] = res["name"].str.extract(r"promotion=([\\w-]+)")
fig, ax = plt.subplots(1, 2, figsize=(11, 4))
for promo, g in res.sort_values("capacity_mib").groupby("promotion"):
    ax[0].plot(g["capacity_mib"], g["metrics.hit_ratio"], marker="o", label=promo)
    ax[1].plot(g["capacity_mib"], g["metrics.latency_us.all.p99"], marker="o", label=promo)
for x in ax:
    x.set_xscale("log", base=2)
    x.set_xlabel("cache capacity (MiB)")
    x.legend(title="promotion")
ax[0].set_ylabel("hit ratio")
ax[1].set_ylabel("p99 latency (µs)")
plt.tight_layout()
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"] = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                  "language_info": {"name": "python"}}
nbf.write(nb, "getting-started.ipynb")
