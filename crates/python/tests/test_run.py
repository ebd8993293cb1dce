"""Running configs from Python gives the records `tiercache sim --json` prints, field by field,
and the same errors."""

import json
from pathlib import Path

import pytest

import tiercache

REPO = Path(__file__).resolve().parents[3]

TIMED = """
name = "py-timed"
[run]
seed = 11
requests = 5000
warmup_requests = 500
[workload]
jobs = 2
iodepth = 4
read_fraction = 0.7
footprint = "32MiB"
distribution = { type = "zipf", theta = 0.9 }
[cache]
capacity = "4MiB"
line_size = "8KiB"
[[variant]]
name = "always"
[[variant]]
name = "nhit2"
set = ["cache.promotion = { policy = 'nhit', n = 2 }"]
"""


def cli_records(cli, *args):
    out = cli("sim", *args, "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_file_config_gives_the_clis_records_field_by_field(cli, tmp_path):
    cfg = tmp_path / "timed.toml"
    cfg.write_text(TIMED)
    expected = cli_records(cli, cfg)
    got = tiercache.run(cfg).records
    assert len(got) == len(expected) == 2
    for g, e in zip(got, expected):
        assert g == e
        assert g["metrics"]["requests"] == 5000


def test_text_and_dict_configs_give_the_same_records_as_the_file(cli, tmp_path):
    import tomllib

    cfg = tmp_path / "timed.toml"
    cfg.write_text(TIMED)
    expected = cli_records(cli, cfg, "--set", "cache.capacity=8MiB", "--only", "nhit")
    by_text = tiercache.run(TIMED, set=["cache.capacity=8MiB"], only="nhit").records
    by_dict = tiercache.run(tomllib.loads(TIMED), set=["cache.capacity=8MiB"], only="nhit").records
    assert by_text == by_dict == expected
    assert [r["name"] for r in by_text] == ["nhit2"]


def test_hit_ratio_example_and_its_dataframe(cli):
    ex = REPO / "examples" / "hit-ratio.toml"
    args = ["--set", "run.requests=20000", "--only", "s3"]
    expected = cli_records(cli, ex, *args)
    runs = tiercache.run(ex, set=args[1:2], only="s3")
    assert runs.records == expected
    df = runs.to_pandas()
    assert list(df["name"]) == ["s3-fifo"]
    assert df.loc[0, "metrics.hit_ratio"] == expected[0]["metrics"]["hit_ratio"]
    assert df.loc[0, "config.cache.capacity"] == "512MiB"
    assert runs.record["metrics"]["requests"] == 20000


def test_a_trace_config_resolves_relative_paths_like_the_cli(cli, traces, tmp_path):
    (tmp_path / "t.csv").write_bytes((traces / "msr-hm0-sample.csv").read_bytes())
    text = """
[run]
mode = "hit-ratio"
[workload]
trace = "t.csv"
[cache]
capacity = "1MiB"
"""
    cfg = tmp_path / "trace.toml"
    cfg.write_text(text)
    expected = cli_records(cli, cfg)
    assert tiercache.run(cfg).records == expected
    assert tiercache.run(text, base_dir=tmp_path).records[0]["metrics"] == expected[0]["metrics"]


@pytest.mark.parametrize(
    "args, config",
    [
        (["--set", "cache.line_size=3KiB"], None),
        (["--set", "cache.bogus=1"], None),
        (["--only", "nothing-matches"], None),
    ],
)
def test_errors_are_exceptions_with_the_clis_message(cli, tmp_path, args, config):
    cfg = tmp_path / "timed.toml"
    cfg.write_text(TIMED)
    p = cli("sim", cfg, *args, check=False)
    assert p.returncode != 0
    message = p.stderr.strip().splitlines()[-1].removeprefix("tiercache: error: ")
    kw = {"set": args[1:2]} if args[0] == "--set" else {"only": args[1]}
    with pytest.raises(tiercache.TiercacheError) as err:
        tiercache.run(cfg, **kw)
    assert str(err.value) == message
    # The command's exit code 2 (bad input) is the InputError subclass.
    assert isinstance(err.value, tiercache.InputError) == (p.returncode == 2)


def test_a_missing_config_file_is_an_input_error(cli, tmp_path):
    missing = tmp_path / "nope.toml"
    p = cli("sim", missing, check=False)
    with pytest.raises(tiercache.InputError) as err:
        tiercache.run(missing)
    assert str(err.value) == p.stderr.strip().removeprefix("tiercache: error: ")
    assert p.returncode == 2


def test_a_config_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError):
        tiercache.run(42)
