"""Design search: ``tiercache tune SPEC`` (or ``python -m tiercache.tune SPEC``).

Instead of running every point of a sweep spec, search its axes for the design that maximises
an objective under constraints, with a black-box optimiser (Optuna's TPE sampler). Each axis of
the spec is one categorical parameter (its labels; a zipped axis is one parameter); a trial is
one design, evaluated on every workload and repetition of the spec (the same points ``sweep``
would run for it, through the same simulator, locally or as Ray tasks), its metrics averaged
over them.

Objectives (each turned into a score to maximise):

- ``iops``: ``metrics.iops``;
- ``p99``: ``metrics.latency_us.all.p99``, minimised;
- ``iops-per-dollar``: IOPS over the cache's price (cache device price per TB × capacity);
- ``cache-writes-per-request``: bytes written to the cache device per request (wear), minimised;
- ``hit-ratio``: ``metrics.hit_ratio`` (hit-ratio-only runs have no timing);
- ``mix``: ``--weights iops=1,p99=-1,...``: the weighted sum of the natural logarithms of those
  figures (scale-free: ``iops=1,p99=-1`` maximises IOPS / p99; a weight is an elasticity).

Constraints: ``--budget DOLLARS`` (the cache's price) and ``--max-p99-us US``. A design that
breaks one is infeasible: the sampler is told (TPE's constraints) and it cannot be the best.

Designs proposed twice are evaluated once. The search stops after ``--trials`` distinct
designs (or when every design was evaluated) and reports the best design, every trial, and how
many designs and points it ran against the full grid.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import _native
from ._native import InputError, TiercacheError

OBJECTIVES = ("iops", "p99", "iops-per-dollar", "cache-writes-per-request", "hit-ratio", "mix")

#: Figures an objective or a weight may name, each with whether more is better.
FIGURES = {
    "iops": True,
    "p99": False,
    "iops-per-dollar": True,
    "cache-writes-per-request": False,
    "hit-ratio": True,
    "cost": False,
}


def figures_of(records: Sequence[dict], cost: float) -> Dict[str, float]:
    """A design's figures: the mean over its points' records, plus its cache's cost."""
    n = len(records)

    def mean(f):
        return sum(f(r["metrics"]) for r in records) / n

    iops = mean(lambda m: m["iops"])
    return {
        "iops": iops,
        "p99": mean(lambda m: m["latency_us"]["all"]["p99"]),
        "hit-ratio": mean(lambda m: m["hit_ratio"]),
        "cache-writes-per-request": mean(
            lambda m: m["cache_bytes_written"] / max(m["requests"], 1)
        ),
        "cost": cost,
        "iops-per-dollar": iops / cost if cost > 0 else math.inf,
    }


def parse_weights(text: str) -> Dict[str, float]:
    """``iops=1,p99=-1`` into a dict; names are checked against :data:`FIGURES`."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in FIGURES:
            raise InputError(
                f"--weights `{part}`: expected NAME=WEIGHT with NAME one of {', '.join(FIGURES)}"
            )
        try:
            out[name] = float(value)
        except ValueError:
            raise InputError(f"--weights `{part}`: `{value.strip()}` is not a number") from None
    if not out:
        raise InputError("--weights: give at least one NAME=WEIGHT")
    return out


def score(fig: Dict[str, float], objective: str, weights: Optional[Dict[str, float]]) -> float:
    """The score to maximise."""
    if objective == "mix":
        total = 0.0
        for name, w in (weights or {}).items():
            v = fig[name]
            total += w * math.log(v) if v > 0 else (-math.inf if w > 0 else math.inf)
        return total
    v = fig[objective]
    return v if FIGURES[objective] else -v


@dataclass
class Design:
    """One design of the grid: its label per axis and its points (workloads × repetitions)."""

    name: str
    labels: Dict[str, str]
    points: List[str]


@dataclass
class TuneResult:
    """The outcome of a search."""

    best: Optional[dict]
    trials: "object"  # pandas DataFrame
    evaluated_designs: int
    evaluated_points: int
    grid_designs: int
    grid_points: int
    axes: Dict[str, List[str]]

    def summary(self) -> str:
        lines = []
        if self.best is None:
            lines.append("no feasible design among those evaluated")
        else:
            b = self.best
            lines.append(f"best design: {b['design']}  ({b['objective']} score {b['score']:.6g})")
            for k in ("iops", "p99", "hit-ratio", "cache-writes-per-request", "cost", "iops-per-dollar"):
                lines.append(f"  {k:26} {b[k]:.6g}")
        lines.append(
            f"evaluated {self.evaluated_designs} of {self.grid_designs} designs "
            f"({self.evaluated_points} of {self.grid_points} points, "
            f"{100.0 * self.evaluated_points / max(self.grid_points, 1):.0f}% of the grid)"
        )
        return "\n".join(lines)


def designs_of(spec, ci: bool = False, set: Sequence[str] = ()):
    """The spec's designs (grouped points) and its axes with their labels, in spec order."""
    payloads = _native.sweep_points(os.fspath(spec), ci=ci, set=[str(s) for s in set])
    designs: Dict[str, Design] = {}
    axes: Dict[str, List[str]] = {}
    for text in payloads:
        p = json.loads(text)
        labels = {a["axis"]: a["label"] for a in p["axes"]}
        for a in p["axes"]:
            seen = axes.setdefault(a["axis"], [])
            if a["label"] not in seen:
                seen.append(a["label"])
        key = p["name"]
        designs.setdefault(key, Design(key, labels, [])).points.append(text)
    return designs, axes, len(payloads)


class _LocalRunner:
    """Runs a design's points in this process, in parallel threads (the simulator releases the
    GIL)."""

    def __init__(self, jobs: int):
        self.pool = ThreadPoolExecutor(max_workers=max(jobs, 1))

    def run(self, points: List[str]) -> List[dict]:
        return [json.loads(r) for r in self.pool.map(_native.simulate_point, points)]

    def close(self):
        self.pool.shutdown()


class _RayRunner:
    """Runs a design's points as Ray tasks (the sweep executor's task)."""

    def __init__(self, address: str):
        import ray

        from .ray_driver import _run_point

        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=None if address == "local" else address, log_to_driver=False)
        self.task = ray.remote(num_cpus=1, max_retries=3)(_run_point)

    def run(self, points: List[str]) -> List[dict]:
        out = []
        for kind, value in self.ray.get([self.task.remote(p, None) for p in points]):
            if kind != "record":
                raise TiercacheError(value)
            out.append(json.loads(value))
        return out

    def close(self):
        pass


def tune(
    spec,
    objective: str = "iops",
    *,
    weights: Optional[Dict[str, float]] = None,
    budget: Optional[float] = None,
    max_p99_us: Optional[float] = None,
    trials: int = 20,
    seed: int = 0,
    startup_trials: Optional[int] = None,
    ray: Optional[str] = None,
    jobs: int = 0,
    ci: bool = False,
    set: Sequence[str] = (),
    out: Optional[os.PathLike] = None,
    verbose: bool = False,
) -> TuneResult:
    """Searches the spec's design space; see the module's documentation."""
    import optuna
    import pandas as pd

    if objective not in OBJECTIVES:
        raise InputError(f"objective `{objective}`: expected one of {', '.join(OBJECTIVES)}")
    if objective == "mix" and not weights:
        raise InputError("objective `mix` needs --weights NAME=WEIGHT,...")
    if trials < 1:
        raise InputError("--trials: must be at least 1")
    designs, axes, grid_points = designs_of(spec, ci=ci, set=set)
    if not axes:
        raise InputError(f"{spec}: the spec has no axes: there is nothing to search")
    by_labels = {tuple(d.labels[a] for a in axes): d for d in designs.values()}
    budget_designs = min(trials, len(designs))

    runner = _RayRunner(ray) if ray else _LocalRunner(jobs or (os.cpu_count() or 1))
    evaluated: Dict[str, dict] = {}
    rows = []

    def evaluate(d: Design) -> dict:
        if d.name not in evaluated:
            records = runner.run(d.points)
            cost = _native.cache_cost_dollars(json.dumps(records[0]["config"]))
            fig = figures_of(records, cost)
            # Each constraint as a value that is ≤ 0 when it holds (Optuna's convention).
            violations = {}
            if budget is not None:
                violations["budget"] = fig["cost"] - budget
            if max_p99_us is not None:
                violations["max_p99_us"] = fig["p99"] - max_p99_us
            evaluated[d.name] = {
                "design": d.name,
                **{f"axis.{a}": d.labels[a] for a in axes},
                **fig,
                "objective": objective,
                "score": score(fig, objective, weights),
                "feasible": all(v <= 0 for v in violations.values()),
                "violations": violations,
                "points": len(d.points),
            }
        return evaluated[d.name]

    optuna.logging.set_verbosity(optuna.logging.INFO if verbose else optuna.logging.WARNING)

    constrained = budget is not None or max_p99_us is not None
    sampler_kw = {}
    if constrained and not hasattr(optuna.trial.Trial, "set_constraint"):
        # Optuna < 5: constraints reach TPE through a function of the finished trial.
        sampler_kw["constraints_func"] = lambda t: t.user_attrs.get("violations") or [0.0]
    sampler = optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=startup_trials if startup_trials is not None else max(2, budget_designs // 3),
        multivariate=True,
        **sampler_kw,
    )
    study = optuna.create_study(direction="maximize", sampler=sampler)
    started = time.monotonic()
    # Proposals of designs already evaluated are answered from memory; bound them so a
    # converged sampler cannot loop forever.
    max_asks = 50 * budget_designs
    asks = 0
    try:
        while len(evaluated) < budget_designs and asks < max_asks:
            asks += 1
            trial = study.ask()
            key = tuple(trial.suggest_categorical(a, labels) for a, labels in axes.items())
            d = by_labels.get(key)
            if d is None:  # a combination the spec does not have (cannot happen for a grid)
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            new = d.name not in evaluated
            row = evaluate(d)
            if constrained and "constraints_func" in sampler_kw:
                trial.set_user_attr("violations", list(row["violations"].values()))
            elif constrained:
                for name, value in row["violations"].items():
                    trial.set_constraint(name, value)
            study.tell(trial, row["score"])
            rows.append({"trial": trial.number, "new": new, **{k: v for k, v in row.items() if k != "violations"}})
            if verbose and new:
                print(
                    f"tune: trial {trial.number}: {d.name}: score {row['score']:.6g}"
                    + ("" if row["feasible"] else " (infeasible)"),
                    file=sys.stderr,
                )
    finally:
        runner.close()
    trials_df = pd.DataFrame(rows)
    feasible = [r for r in evaluated.values() if r["feasible"]]
    best = max(feasible, key=lambda r: r["score"]) if feasible else None
    if best is not None:
        best = {k: v for k, v in best.items() if k != "violations"}
    result = TuneResult(
        best=best,
        trials=trials_df,
        evaluated_designs=len(evaluated),
        evaluated_points=sum(r["points"] for r in evaluated.values()),
        grid_designs=len(designs),
        grid_points=grid_points,
        axes=axes,
    )
    if out is not None:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        trials_df.to_csv(o / "trials.csv", index=False)
        (o / "best.json").write_text(
            json.dumps(
                {
                    "best": best,
                    "evaluated_designs": result.evaluated_designs,
                    "evaluated_points": result.evaluated_points,
                    "grid_designs": result.grid_designs,
                    "grid_points": result.grid_points,
                    "seconds": time.monotonic() - started,
                },
                indent=2,
            )
        )
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="tiercache tune",
        description="Search a sweep spec's axes for the best design (Optuna TPE).",
        epilog="Objectives: " + ", ".join(OBJECTIVES) + ". See `pydoc tiercache.tune`.",
    )
    ap.add_argument("spec", help="sweep spec (TOML): its axes are the search space")
    ap.add_argument("--objective", default="iops", choices=OBJECTIVES)
    ap.add_argument("--weights", help="for --objective mix: NAME=WEIGHT,... (log-linear)")
    ap.add_argument("--budget", type=float, help="most dollars the cache may cost")
    ap.add_argument("--max-p99-us", type=float, help="tail-latency bound (µs, all requests)")
    ap.add_argument("--trials", type=int, default=20, help="distinct designs to evaluate at most")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sampler")
    ap.add_argument("--startup-trials", type=int, help="random trials before TPE models (default: a third of --trials)")
    ap.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS", help="run points as Ray tasks")
    ap.add_argument("-j", "--jobs", type=int, default=0, help="points run in parallel locally (default: cores)")
    ap.add_argument("--ci", action="store_true", help="apply the spec's [ci] profile")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a base key")
    ap.add_argument("-o", "--out", help="write trials.csv and best.json here")
    ap.add_argument("--json", action="store_true", help="print the best design and counts as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each new trial")
    args = ap.parse_args(argv)
    try:
        result = tune(
            args.spec,
            args.objective,
            weights=parse_weights(args.weights) if args.weights else None,
            budget=args.budget,
            max_p99_us=args.max_p99_us,
            trials=args.trials,
            seed=args.seed,
            startup_trials=args.startup_trials,
            ray=args.ray,
            jobs=args.jobs,
            ci=args.ci,
            set=args.set,
            out=args.out,
            verbose=args.verbose,
        )
    except InputError as e:
        print(f"tiercache: error: {e}", file=sys.stderr)
        return 2
    except TiercacheError as e:
        print(f"tiercache: error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"tiercache: error: tune needs Optuna ({e}): pip install optuna", file=sys.stderr)
        return 1
    if args.json:
        print(
            json.dumps(
                {
                    "best": result.best,
                    "evaluated_designs": result.evaluated_designs,
                    "evaluated_points": result.evaluated_points,
                    "grid_designs": result.grid_designs,
                    "grid_points": result.grid_points,
                }
            )
        )
    else:
        cols = ["trial", "design", "score", "feasible"]
        t = result.trials
        if len(t):
            print(t[t["new"]][cols].to_string(index=False))
        print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
