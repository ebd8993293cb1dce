"""Sweeps from Python and on Ray: the same rows as the local runner, resumable, and a task whose
worker dies retried; results loaded from every results file alike."""

import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest

import tiercache

#: Columns that differ between two runs of the same point by design (wall-clock).
VOLATILE = {"elapsed_s"}


def rows(out_dir):
    """Each point's result line, keyed by point id, without wall-clock fields."""
    out = {}
    for line in (out_dir / "results.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        v = json.loads(line)
        out[v["point"]] = {k: x for k, x in v.items() if k not in VOLATILE}
    return out


@pytest.fixture(scope="module")
def local_sweep(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    res = tiercache.sweep(data / "small-sweep.toml", out, jobs=2, progress=False)
    assert res.summary["ok"] == res.summary["total"] == 36
    # What the CLI prints of earlier results is in the summary too.
    assert (res.summary["not_retried"], res.summary["other_lines"]) == (0, 0)
    return out


def test_python_sweep_equals_the_cli_sweep(cli, data, local_sweep, tmp_path):
    cli("sweep", data / "small-sweep.toml", "-o", tmp_path, "-j", "2", "--no-progress")
    assert rows(tmp_path) == rows(local_sweep)


def test_results_load_alike_from_parquet_csv_and_jsonl(local_sweep):
    by_parquet = tiercache.load_results(local_sweep / "results.parquet")
    by_csv = tiercache.load_results(local_sweep / "results.csv")
    by_jsonl = tiercache.load_results(local_sweep / "results.jsonl")
    assert len(by_parquet) == len(by_csv) == len(by_jsonl) == 36
    assert list(by_csv.columns) == list(by_jsonl.columns)
    key = "point"
    for col in ("metrics.iops", "metrics.hit_ratio", "metrics.latency_us.all.p99"):
        a = by_parquet.set_index(key)[col].sort_index()
        b = by_csv.set_index(key)[col].sort_index()
        c = by_jsonl.set_index(key)[col].sort_index()
        pd.testing.assert_series_equal(a, b, check_dtype=False, check_names=False)
        pd.testing.assert_series_equal(b, c, check_names=False)
    assert tiercache.load_results(local_sweep).shape == by_parquet.shape
    with pytest.raises(tiercache.InputError):
        tiercache.load_results(local_sweep / "nope.csv")


def test_a_ray_sweep_gives_the_local_runners_rows(ray_address, data, local_sweep, tmp_path):
    res = tiercache.sweep(data / "small-sweep.toml", tmp_path, ray=ray_address, progress=False)
    assert (res.summary["ok"], res.summary["failed"]) == (36, 0)
    assert rows(tmp_path) == rows(local_sweep)
    assert len(res.results) == 36
    assert (tmp_path / "results.parquet").exists()


def test_an_interrupted_ray_sweep_resumes(cli, ray_address, data, local_sweep, tmp_path):
    args = [cli.path, "sweep", str(data / "small-sweep.toml"), "-o", str(tmp_path), "--ray", ray_address, "-j", "1", "--no-progress"]
    proc = subprocess.Popen(args, env=cli.environ(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    jsonl = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and len(jsonl.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the sweep ended before it was interrupted: {proc.stderr.read().decode()}"
    os.killpg(proc.pid, signal.SIGKILL)  # the command and its Ray driver, as a Ctrl-C storm would
    proc.wait()
    done_before = len(rows(tmp_path))
    assert 3 <= done_before < 36
    p = cli("sweep", data / "small-sweep.toml", "-o", tmp_path, "--ray", ray_address, "--no-progress")
    assert f"{done_before} already done" in p.stderr
    assert rows(tmp_path) == rows(local_sweep)
    # Each point ran once: no line was appended twice.
    assert len([l for l in jsonl.read_text().splitlines() if l.strip()]) == 36


def test_a_ray_task_whose_worker_dies_is_retried(cli, ray_address, data, local_sweep, tmp_path):
    faults = tmp_path / "faults"
    faults.mkdir()
    env = dict(cli.environ(), TIERCACHE_RAY_FAULT_DIR=str(faults))
    out = tmp_path / "out"
    p = subprocess.run(
        [cli.path, "sweep", str(data / "small-sweep.toml"), "-o", str(out), "--ray", ray_address, "--no-progress", "--ci"],
        env=env, capture_output=True, text=True,
    )
    assert p.returncode == 0, p.stderr
    # Every point's first attempt killed its worker; every point still succeeded, with the
    # record a local run of it gives.
    assert len(list(faults.iterdir())) == 6
    lines = rows(out)
    assert len(lines) == 6 and all(v["status"] == "ok" for v in lines.values())
    local = rows(local_sweep)
    assert all(lines[k]["record"] == local[k]["record"] for k in lines)


def test_ray_at_an_unreachable_address_fails_with_a_clear_error(cli, data, tmp_path):
    pytest.importorskip("ray")
    p = cli("sweep", data / "small-sweep.toml", "-o", tmp_path, "--ray", "127.0.0.1:1", "--no-progress", check=False, timeout=120)
    assert p.returncode != 0
    assert "--ray 127.0.0.1:1" in p.stderr and "nothing accepts connections at 127.0.0.1:1" in p.stderr


def test_ray_without_the_python_package_says_how_to_get_it(cli, data, tmp_path):
    env = dict(cli.environ(), TIERCACHE_PYTHON=str(tmp_path / "no-python"))
    p = subprocess.run([cli.path, "sweep", str(data / "small-sweep.toml"), "-o", str(tmp_path), "--ray"], env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert "tiercache Python package" in p.stderr and "no-python" in p.stderr


def test_hit_ratio_trace_points_carry_their_gap_to_opt(traces, tmp_path):
    """The sweep records' `metrics.opt` (docs/design.md §9) reach Python as columns: OPT's miss
    ratio is one for the trace and size, no design misses less, Belady's gap is zero."""
    (tmp_path / "base.toml").write_text(
        "[run]\nmode = 'hit-ratio'\n"
        f"[workload]\ntrace = '{traces / 'msr-hm0-sample.csv'}'\n"
        "[cache]\ncapacity = '64KiB'\n"
    )
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        'name = "opt-gap"\nbase = "base.toml"\n'
        '[[axis]]\nname = "eviction"\nkey = "cache.eviction"\nvalues = ["lru", "arc", "belady"]\n'
        '[[workload]]\nname = "hm0"\n'
    )
    out = tmp_path / "out"
    res = tiercache.sweep(spec, out, jobs=1, progress=False)
    assert res.summary["ok"] == 3
    df = tiercache.load_results(out)
    for col in ("metrics.opt.miss_ratio", "metrics.opt.gap_miss_ratio", "metrics.opt.writeback.bound"):
        assert col in df.columns, col
    assert df["metrics.opt.miss_ratio"].nunique() == 1
    miss = 1.0 - df["metrics.hit_ratio"]
    assert (miss >= df["metrics.opt.miss_ratio"] - 1e-12).all()
    assert (df["metrics.opt.writeback.cost"] >= df["metrics.opt.writeback.bound"]).all()
    belady = df[df["name"].str.contains("belady")]
    assert abs(float(belady["metrics.opt.gap_miss_ratio"].iloc[0])) < 1e-12
