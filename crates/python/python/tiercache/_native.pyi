"""Type stubs of the compiled half of tiercache (crates/python/src/lib.rs)."""

from os import PathLike
from typing import Iterator, List, Optional, Sequence, Tuple, Union

_Path = Union[str, PathLike[str]]

class TiercacheError(Exception):
    """An error of tiercache: the message is the one the `tiercache` command prints."""

class InputError(TiercacheError):
    """Bad input (config, argument, trace, spec): the command exits with code 2 for these."""

class TraceBatches(Iterator[Tuple[int, bytes, bytes, bytes, bytes, bytes, List[str]]]):
    """Column batches of a trace: (count, time_ns u64, volume u16, op u8, offset u64,
    length u64 as little-endian bytes, names of the volumes seen so far)."""
    def __iter__(self) -> "TraceBatches": ...
    def __next__(self) -> Tuple[int, bytes, bytes, bytes, bytes, bytes, List[str]]: ...
    def volume_names(self) -> List[str]: ...
    def counters_json(self) -> str: ...
    def meta_json(self) -> str: ...

def run_config(
    text: Optional[str],
    source: str,
    path: Optional[_Path] = None,
    base_dir: Optional[_Path] = None,
    overrides: Sequence[str] = ...,
    only: Optional[str] = None,
    skip_bad: bool = False,
) -> List[str]: ...
def default_config() -> str: ...
def toml_from_json(json: str) -> str: ...
def open_trace(
    path: str,
    format: Optional[str] = None,
    skip_bad: bool = False,
    batch_size: int = 65536,
    oracle_line_size: int = 4096,
    csv_map: Optional[str] = None,
) -> TraceBatches: ...
def analyze(
    path: str,
    format: Optional[str] = None,
    skip_bad: bool = False,
    line_size: int = 4096,
    sizes: Sequence[int] = ...,
    footprint_fractions: Sequence[float] = ...,
    shards_rate: Optional[float] = None,
    shards_max_entries: Optional[int] = None,
    exact: bool = False,
    policies: Sequence[str] = ...,
    minisim_rate: float = 0.01,
    write_reuse_threshold: float = 0.5,
    interval: str = "1s",
    burst_factor: float = 2.0,
    oracle_line_size: int = 4096,
    csv_map: Optional[str] = None,
) -> str: ...
def run_sweep(
    spec: _Path,
    out: Optional[_Path] = None,
    jobs: Optional[int] = None,
    ci: bool = False,
    set: Sequence[str] = ...,
    retry_failed: bool = True,
    progress: bool = True,
    ray: Optional[str] = None,
) -> str: ...
def sweep_points(spec: _Path, ci: bool = False, set: Sequence[str] = ...) -> List[str]: ...
def simulate_point(payload: str) -> str: ...
def cache_cost_dollars(config_json: str) -> float: ...
def results_csv(path: _Path) -> str: ...
def version() -> str: ...
def write_synthetic_trace(path: str, records: int, format: str) -> None: ...
def bench_read(path: str, format: Optional[str] = None) -> Tuple[int, float]: ...
