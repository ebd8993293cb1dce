"""Trace analysis from Python equals `tiercache analyze --json`, as DataFrames."""

import json

import numpy as np
import pytest

import tiercache


def test_analysis_equals_the_clis_json_and_its_frames_hold_it(cli, traces):
    src = traces / "msr-hm0-sample.csv"
    expected = json.loads(cli("analyze", src, "--json", "--sizes", "1,4,16,64,256", "--shards-rate", "0.5", "--exact").stdout)
    a = tiercache.analyze(src, sizes=[1, 4, 16, 64, 256], shards_rate=0.5, exact=True)
    assert a.raw == expected
    assert a.mrc["lines"].tolist() == [1, 4, 16, 64, 256]
    assert a.mrc["miss_ratio"].tolist() == [p["miss_ratio"] for p in expected["curve"]]
    assert "shards_miss_ratio" in a.mrc
    # Miss ratios of LRU never grow with the cache (inclusion property).
    assert np.all(np.diff(a.mrc["miss_ratio"].to_numpy()) <= 1e-12)
    assert len(a.advice) == len(expected["volumes"])
    assert set(a.advice.columns) >= {"volume", "urd_demand_lines", "trd_demand_lines", "write_policy", "rar", "war"}
    # Every reuse is one of the four types.
    v = expected["volumes"][0]
    assert a.advice.loc[0, ["rar", "raw", "war", "waw"]].sum() == sum(v["reuse_types"])
    # Cumulative distributions rise to 1.
    assert np.all(np.diff(a.reuse["trd_cdf"].to_numpy()) >= 0)
    assert a.reuse["trd_cdf"].iloc[-1] == pytest.approx(1.0)
    assert set(a.volume_mrc["volume"]) == {x["name"] for x in expected["volumes"]}


def test_a_sampled_analysis_equals_the_clis_and_leaves_exact_frames_empty(cli, traces):
    src = traces / "msr-hm0-sample.csv"
    expected = json.loads(cli("analyze", src, "--json", "--sizes", "4,64", "--shards-rate", "0.5").stdout)
    a = tiercache.analyze(src, sizes=[4, 64], shards_rate=0.5)
    assert a.raw == expected
    assert "volumes" not in expected and a.advice.empty and a.reuse.empty
    assert "shards_miss_ratio" in a.mrc and "miss_ratio" not in a.mrc


def test_policy_curves_by_minisimulation(traces):
    a = tiercache.analyze(traces / "msr-hm0-sample.csv", policies=["fifo", "sieve"], minisim_rate=1.0, sizes=[8, 64])
    assert set(a.policies["policy"]) == {"fifo", "sieve"}
    assert len(a.policies) == 4


def test_bad_arguments_raise_the_clis_message(cli, traces):
    src = traces / "msr-hm0-sample.csv"
    p = cli("analyze", src, "--shards-rate", "2", check=False)
    assert p.returncode == 2
    with pytest.raises(tiercache.InputError) as err:
        tiercache.analyze(src, shards_rate=2.0)
    assert str(err.value) == p.stderr.strip().removeprefix("tiercache: error: ")
    # `lfu` is a policy now (issue 35); a name no policy has is refused, naming it.
    with pytest.raises(tiercache.InputError, match="lfu-x"):
        tiercache.analyze(src, policies=["lfu-x"])


def test_reader_options_reach_the_analysis(cli, traces):
    # A CSV mapping, as `tiercache analyze --format csv --csv-map` takes it.
    src = traces / "msr-hm0-sample.csv"
    mapping = "offset=4,len=5,op=3,volume=1+2,time=0:filetime"
    expected = json.loads(cli("analyze", src, "--json", "--format", "csv", "--csv-map", mapping).stdout)
    a = tiercache.analyze(src, format="csv", csv_map=mapping)
    assert a.raw == expected
    assert a.raw["line_accesses"] == tiercache.analyze(src).raw["line_accesses"]
