"""tiercache from Python: simulate cache designs, read and analyse block traces, run sweeps.

Everything runs the tiercache library compiled into :mod:`tiercache._native`, the code the
``tiercache`` command runs, so a config gives the same result record here as with
``tiercache sim --json`` and a bad input the same error message (raised as
:class:`InputError`, the errors the command exits with code 2 for, or :class:`TiercacheError`).

- :func:`run` a config (TOML text, a dict, or a path) into records and a DataFrame;
- :func:`iter_trace` / :func:`read_trace` any trace the command reads into Arrow;
- :func:`analyze` a trace into miss-ratio, reuse-distance and advice DataFrames;
- :func:`sweep` a spec (locally, or on Ray with ``ray=ADDRESS``) and :func:`load_results`;
- :mod:`tiercache.tune` searches a spec's design space with Optuna.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from . import _native
from ._native import InputError, TiercacheError

__all__ = [
    "InputError",
    "TiercacheError",
    "Runs",
    "run",
    "default_config",
    "iter_trace",
    "read_trace",
    "Analysis",
    "analyze",
    "SweepResult",
    "sweep",
    "load_results",
    "OPS",
    "__version__",
]

__version__: str = _native.version()

#: Operation names by the codes in a trace's ``op`` column (as in the native trace format).
OPS: tuple = ("read", "write", "trim", "flush")

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any], None]


@dataclass
class Runs:
    """The runs of one config (one per ``[[variant]]``, or one): each a result record as
    ``tiercache sim --json`` prints it."""

    records: list = field(default_factory=list)

    @property
    def record(self) -> dict:
        """The record of a config with a single run."""
        if len(self.records) != 1:
            raise ValueError(
                f"the config made {len(self.records)} runs; use .records or .to_pandas()"
            )
        return self.records[0]

    def to_pandas(self):
        """One row per run; nested fields flattened with dots (``metrics.hit_ratio``,
        ``metrics.latency_us.all.p99``, ``config.cache.line_size``)."""
        import pandas as pd

        return pd.json_normalize(self.records, sep=".")

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __getitem__(self, i):
        return self.records[i]


def _config_args(config: ConfigLike) -> dict:
    """How :func:`run` hands a config to the library: a file path, TOML text or a dict."""
    if config is None:
        return {"text": None, "source": "<embedded examples/default.toml>"}
    if isinstance(config, Mapping):
        return {
            "text": _native.toml_from_json(json.dumps(config)),
            "source": "<dict>",
        }
    if isinstance(config, os.PathLike):
        return {"text": None, "source": os.fspath(config), "path": os.fspath(config)}
    if isinstance(config, str):
        looks_like_path = "\n" not in config and "=" not in config and "[" not in config
        if looks_like_path:
            return {"text": None, "source": config, "path": config}
        return {"text": config, "source": "<text>"}
    raise TypeError(
        f"config: expected TOML text, a dict or a path, not {type(config).__name__}"
    )


def run(
    config: ConfigLike = None,
    *,
    set: Sequence[str] = (),
    only: Optional[str] = None,
    skip_bad: bool = False,
    base_dir: Union[str, "os.PathLike[str]", None] = None,
) -> Runs:
    """Runs a config as ``tiercache sim`` does and returns its records.

    ``config`` is TOML text, a dict of the same tree, a path to a ``.toml`` file, or ``None``
    for the embedded default. ``set`` are ``key=value`` overrides (``--set``), ``only`` keeps
    the variants whose name contains it (``--only``), ``skip_bad`` skips malformed trace records
    (``--skip-bad``). Relative trace paths resolve against the file's directory, or against
    ``base_dir`` (default: the working directory) for text and dicts. The GIL is released while
    the simulation runs.
    """
    kw = _config_args(config)
    if base_dir is not None:
        kw["base_dir"] = os.fspath(base_dir)
    lines = _native.run_config(
        overrides=[str(s) for s in set], only=only, skip_bad=skip_bad, **kw
    )
    return Runs([json.loads(line) for line in lines])


def default_config() -> str:
    """The TOML of the config ``tiercache sim`` runs without one (``examples/default.toml``)."""
    return _native.default_config()


def _batch(cols, pa):
    count, time_ns, volume, op, offset, length, names = cols
    def col(buf, typ):
        return pa.Array.from_buffers(typ, count, [None, pa.py_buffer(buf)])
    volumes = pa.DictionaryArray.from_arrays(
        col(volume, pa.uint16()), pa.array(names, pa.string())
    )
    ops = pa.DictionaryArray.from_arrays(col(op, pa.uint8()), pa.array(OPS, pa.string()))
    return pa.RecordBatch.from_arrays(
        [col(time_ns, pa.uint64()), volumes, ops, col(offset, pa.uint64()), col(length, pa.uint64())],
        names=["time_ns", "volume", "op", "offset", "length"],
    )


def iter_trace(
    path: Union[str, "os.PathLike[str]"],
    format: Optional[str] = None,
    *,
    batch_size: int = 65536,
    skip_bad: bool = False,
    oracle_line_size: int = 4096,
    csv_map: Optional[str] = None,
) -> Iterator:
    """Reads a trace in any format the command reads (compressed or not, format detected unless
    given) as Arrow record batches of up to ``batch_size`` requests, in file order.

    Columns: ``time_ns`` (uint64, since the first record), ``volume`` (dictionary of uint16
    dense ids to the names in the trace), ``op`` (dictionary of uint8 to read, write, trim,
    flush), ``offset`` and ``length`` (uint64, bytes). The column buffers are filled by the
    reader without the GIL and wrapped by Arrow without a further copy. A malformed record
    raises :class:`InputError` with the reader's message (file, line or offset, field) unless
    ``skip_bad``.
    """
    import pyarrow as pa

    reader = _native.open_trace(
        os.fspath(path),
        format=format,
        skip_bad=skip_bad,
        batch_size=batch_size,
        oracle_line_size=oracle_line_size,
        csv_map=csv_map,
    )
    for cols in reader:
        yield _batch(cols, pa)


def read_trace(path: Union[str, "os.PathLike[str]"], format: Optional[str] = None, **kw):
    """The whole trace as one Arrow table (see :func:`iter_trace` for columns and options);
    ``.to_pandas()`` it for a DataFrame."""
    import pyarrow as pa

    batches = list(iter_trace(path, format, **kw))
    if not batches:
        schema = _batch((0, b"", b"", b"", b"", b"", []), pa).schema
        return pa.Table.from_batches([], schema=schema)
    # Each batch's volume dictionary lists the volumes seen so far; unify them into one.
    return pa.Table.from_batches(batches).unify_dictionaries()


@dataclass
class Analysis:
    """What ``tiercache analyze`` computes, as DataFrames.

    - ``mrc``: the exact LRU miss-ratio curve of all volumes sharing one cache (``lines``,
      ``bytes``, ``miss_ratio``, ``read_miss_ratio``, ``write_miss_ratio``, and
      ``shards_miss_ratio`` when SHARDS was asked for);
    - ``volume_mrc``: the same per volume (a ``volume`` column);
    - ``reuse``: cumulative distributions of reuse distances: ``distance_lines``, ``trd_cdf``
      (share of reuses with traditional reuse distance ≤ it), ``urd_cdf`` (share of read
      reuses with useful reuse distance ≤ it);
    - ``advice``: per volume, sizing (URD and TRD demands, URD knee) and write policy, with the
      reuse counts RAR, RAW, WAR, WAW;
    - ``policies``: other replacement policies' curves by mini-simulation (when asked for);
    - ``summary``: the scalar figures; ``raw``: the whole analysis as the command's JSON.
    """

    raw: dict
    mrc: Any
    volume_mrc: Any
    reuse: Any
    advice: Any
    policies: Any
    summary: dict


def analyze(
    path: Union[str, "os.PathLike[str]"],
    format: Optional[str] = None,
    *,
    line_size: int = 4096,
    sizes: Sequence[int] = (),
    footprint_fractions: Sequence[float] = (),
    shards_rate: Optional[float] = None,
    shards_max_entries: Optional[int] = None,
    exact: bool = False,
    policies: Sequence[str] = (),
    minisim_rate: float = 0.01,
    write_reuse_threshold: float = 0.5,
    interval: str = "1s",
    burst_factor: float = 2.0,
    skip_bad: bool = False,
    oracle_line_size: int = 4096,
    csv_map: Optional[str] = None,
) -> Analysis:
    """Analyses a trace exactly as ``tiercache analyze --json`` (same options, same errors)."""
    import pandas as pd

    text = _native.analyze(
        os.fspath(path),
        format=format,
        skip_bad=skip_bad,
        line_size=line_size,
        sizes=list(sizes),
        footprint_fractions=list(footprint_fractions),
        shards_rate=shards_rate,
        shards_max_entries=shards_max_entries,
        exact=exact,
        policies=list(policies),
        minisim_rate=minisim_rate,
        write_reuse_threshold=write_reuse_threshold,
        interval=interval,
        burst_factor=burst_factor,
        oracle_line_size=oracle_line_size,
        csv_map=csv_map,
    )
    raw = json.loads(text)
    mrc = pd.DataFrame(raw["curve"])
    vol_rows = []
    advice_rows = []
    # Under sampling (`shards_rate` or `shards_max_entries` without `exact`) the exact
    # outputs are not computed and absent: their frames are empty.
    for v in raw.get("volumes", []):
        for p in v["curve"]:
            vol_rows.append({"volume": v["name"], **p})
        rar, raw_, war, waw = v["reuse_types"]
        advice_rows.append(
            {
                "volume": v["name"],
                "line_accesses": v["line_accesses"],
                "footprint_lines": v["footprint_lines"],
                "rar": rar,
                "raw": raw_,
                "war": war,
                "waw": waw,
                **v["advice"],
            }
        )
    reuse = pd.DataFrame(raw.get("reuse_cdf", []), columns=["distance_lines", "trd_cdf", "urd_cdf"])
    pol_rows = []
    if raw.get("minisim"):
        for c in raw["minisim"]["curves"]:
            for lines, mr in c["points"]:
                pol_rows.append({"policy": c["policy"], "lines": lines, "miss_ratio": mr})
    summary = {
        k: v
        for k, v in raw.items()
        if not isinstance(v, (list, dict)) or k == "shards"
    }
    return Analysis(
        raw=raw,
        mrc=mrc,
        volume_mrc=pd.DataFrame(vol_rows),
        reuse=reuse,
        advice=pd.DataFrame(advice_rows),
        policies=pd.DataFrame(pol_rows, columns=["policy", "lines", "miss_ratio"]),
        summary=summary,
    )


@dataclass
class SweepResult:
    """What :func:`sweep` did (points total, already done, run ok, failed) and where."""

    summary: dict
    out_dir: Path

    @property
    def results(self):
        """The sweep's results (every point's latest line) as a DataFrame."""
        return load_results(self.out_dir)


def _python_for_drivers() -> None:
    # `sweep(ray=...)` starts the Ray driver with this interpreter, not whatever python3 is.
    os.environ.setdefault("TIERCACHE_PYTHON", sys.executable)


def sweep(
    spec: Union[str, "os.PathLike[str]"],
    out: Union[str, "os.PathLike[str]", None] = None,
    *,
    jobs: Optional[int] = None,
    ci: bool = False,
    set: Sequence[str] = (),
    retry_failed: bool = True,
    progress: bool = True,
    ray: Optional[str] = None,
) -> SweepResult:
    """Runs a sweep spec exactly as ``tiercache sweep SPEC`` (same points, results files and
    resume): ``out`` is ``-o``, ``jobs`` ``-j``, ``ci`` ``--ci``, ``set`` ``--set``,
    ``retry_failed=False`` ``--no-retry-failed``, and ``ray="ADDRESS"`` ``--ray ADDRESS`` (one
    Ray task per point; ``"auto"`` for the cluster on this machine, ``"local"`` to start one).
    Raises :class:`TiercacheError` when points failed (after every point ran)."""
    if ray is not None:
        _python_for_drivers()
    text = _native.run_sweep(
        os.fspath(spec),
        out=None if out is None else os.fspath(out),
        jobs=jobs,
        ci=ci,
        set=[str(s) for s in set],
        retry_failed=retry_failed,
        progress=progress,
        ray=ray,
    )
    summary = json.loads(text)
    return SweepResult(summary=summary, out_dir=Path(summary["results_jsonl"]).parent)


def load_results(path: Union[str, "os.PathLike[str]"]):
    """A sweep's results as a DataFrame: the output directory (its ``results.parquet``, else
    ``results.csv``, else ``results.jsonl``) or one of those files. Columns are the tidy table
    of ``results.csv`` (point, name, workload, rep, axis values, metrics)."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        for name in ("results.parquet", "results.csv", "results.jsonl"):
            if (p / name).exists():
                p = p / name
                break
        else:
            raise InputError(f"{path}: no results.parquet, results.csv or results.jsonl in it")
    if not p.exists():
        raise InputError(f"{p}: No such file or directory (os error 2)")
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".csv":
        return pd.read_csv(p)
    if p.suffix in (".jsonl", ".json"):
        return pd.read_csv(StringIO(_native.results_csv(os.fspath(p))))
    raise InputError(f"{p}: expected results.parquet, results.csv or results.jsonl")
