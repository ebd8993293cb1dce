"""Type stubs of the tiercache package's public API."""

from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import pandas as pd
import pyarrow as pa

from ._native import InputError as InputError, TiercacheError as TiercacheError

__version__: str
OPS: tuple

_Path = Union[str, PathLike[str]]
ConfigLike = Union[str, PathLike[str], Mapping[str, Any], None]

@dataclass
class Runs:
    records: List[Dict[str, Any]]
    @property
    def record(self) -> Dict[str, Any]: ...
    def to_pandas(self) -> pd.DataFrame: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Dict[str, Any]]: ...
    def __getitem__(self, i: int) -> Dict[str, Any]: ...

def run(
    config: ConfigLike = None,
    *,
    set: Sequence[str] = ...,
    only: Optional[str] = None,
    skip_bad: bool = False,
    base_dir: Optional[_Path] = None,
) -> Runs: ...
def default_config() -> str: ...
def iter_trace(
    path: _Path,
    format: Optional[str] = None,
    *,
    batch_size: int = 65536,
    skip_bad: bool = False,
    oracle_line_size: int = 4096,
    csv_map: Optional[str] = None,
) -> Iterator[pa.RecordBatch]: ...
def read_trace(path: _Path, format: Optional[str] = None, **kw: Any) -> pa.Table: ...

@dataclass
class Analysis:
    raw: Dict[str, Any]
    mrc: pd.DataFrame
    volume_mrc: pd.DataFrame
    reuse: pd.DataFrame
    advice: pd.DataFrame
    policies: pd.DataFrame
    summary: Dict[str, Any]

def analyze(
    path: _Path,
    format: Optional[str] = None,
    *,
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
    skip_bad: bool = False,
    oracle_line_size: int = 4096,
    csv_map: Optional[str] = None,
) -> Analysis: ...

@dataclass
class SweepResult:
    summary: Dict[str, Any]
    out_dir: Path
    @property
    def results(self) -> pd.DataFrame: ...

def sweep(
    spec: _Path,
    out: Optional[_Path] = None,
    *,
    jobs: Optional[int] = None,
    ci: bool = False,
    set: Sequence[str] = ...,
    retry_failed: bool = True,
    progress: bool = True,
    ray: Optional[str] = None,
) -> SweepResult: ...
def load_results(path: _Path) -> pd.DataFrame: ...
