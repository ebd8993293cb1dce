"""Design search finds the grid's best design in fewer evaluations than the grid has designs."""

import json

import pytest

import tiercache
from tiercache import tune as tn

optuna = pytest.importorskip("optuna")


def grid_best(out_dir, objective, budget=None):
    """The best design of the full grid, from its results, by the tuner's own figures."""
    by_design = {}
    for line in (out_dir / "results.jsonl").read_text().splitlines():
        v = json.loads(line)
        by_design.setdefault(v["name"], []).append(v["record"])
    scores = {}
    for name, records in by_design.items():
        cost = tiercache._native.cache_cost_dollars(json.dumps(records[0]["config"]))
        fig = tn.figures_of(records, cost)
        if budget is None or fig["cost"] <= budget:
            scores[name] = tn.score(fig, objective, None)
    top = max(scores.values())
    # Designs may tie (capacities beyond the working set give the same run): any of them is best.
    return {n for n, v in scores.items() if v == top}, scores


@pytest.fixture(scope="module")
def grid(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("grid")
    tiercache.sweep(data / "small-sweep.toml", out, jobs=2, progress=False)
    return out


@pytest.mark.parametrize("objective, budget", [("iops", None), ("iops-per-dollar", None), ("p99", 0.06)])
def test_tune_finds_the_grids_best_in_fewer_trials(data, grid, objective, budget):
    best, scores = grid_best(grid, objective, budget)
    # Half the grid's designs, the sampler's defaults otherwise (a third of them random).
    r = tn.tune(data / "small-sweep.toml", objective, budget=budget, trials=18, seed=1, jobs=2)
    assert r.grid_designs == 36 and r.grid_points == 36
    assert r.evaluated_designs == 18 < r.grid_designs
    assert r.evaluated_points == 18
    assert r.best["design"] in best, (r.best["design"], best, sorted(scores.items(), key=lambda x: -x[1])[:3])
    assert r.best["score"] == scores[r.best["design"]]
    # The trials table holds every proposal, the evaluated ones marked new.
    assert r.trials["new"].sum() == 18
    if budget is not None:
        assert r.best["cost"] <= budget
        assert r.best["feasible"]


def test_a_cache_price_is_the_device_price_times_capacity():
    cfg = {"cache": {"capacity": "1GiB"}, "devices": {"cache": "ram-disk"}}
    # ram-disk: 6,400 $/TB (docs/design.md §5)
    assert tiercache._native.cache_cost_dollars(json.dumps(cfg)) == pytest.approx(6400 * (1 << 30) / 1e12)


def test_mix_weights_are_log_linear():
    fig = {"iops": 1000.0, "p99": 10.0}
    assert tn.score(fig, "mix", {"iops": 1, "p99": -1}) == pytest.approx(2.302585092994046 * 2)
    with pytest.raises(tiercache.InputError):
        tn.parse_weights("latency=1")


def test_the_tune_command_reports_best_and_counts(cli, data, tmp_path):
    p = cli("tune", data / "small-sweep.toml", "--objective", "iops", "--trials", "4", "--seed", "3", "--json", "-o", tmp_path)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["evaluated_designs"] == 4 and out["grid_designs"] == 36
    assert out["best"]["design"]
    assert (tmp_path / "trials.csv").exists()
    bad = cli("tune", data / "small-sweep.toml", "--objective", "mix", check=False)
    assert bad.returncode == 2 and "--weights" in bad.stderr


def test_tune_on_ray_makes_the_same_trials_as_locally(data, ray_address):
    local = tn.tune(data / "small-sweep.toml", "iops-per-dollar", trials=5, seed=4, jobs=2)
    on_ray = tn.tune(data / "small-sweep.toml", "iops-per-dollar", trials=5, seed=4, ray=ray_address)
    assert on_ray.trials.equals(local.trials)
    assert on_ray.best == local.best
