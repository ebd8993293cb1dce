"""Traces read from Python hold the records `tiercache trace convert` writes, checked against
the native format parsed here independently (its documented layout)."""

import struct

import numpy as np
import pyarrow as pa
import pytest

import tiercache

NATIVE = np.dtype(
    [("time_ns", "<u8"), ("offset", "<u8"), ("length", "<u4"), ("volume", "<u2"), ("op", "u1"), ("pad", "u1")]
)


def parse_native(path):
    """The native trace format, from its documented layout (crates/trace/src/native.rs)."""
    b = path.read_bytes()
    assert b[:8] == b"TCTRACE\0"
    count, table_off, table_len, nvol = struct.unpack_from("<QQQI", b, 16)
    recs = np.frombuffer(b, dtype=NATIVE, count=count, offset=64)
    names, pos = [], table_off
    for _ in range(nvol):
        (n,) = struct.unpack_from("<H", b, pos)
        names.append(b[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return recs, names


def converted(cli, src, tmp_path):
    out = tmp_path / "out.tctrace"
    cli("trace", "convert", src, out, "--to", "native")
    return parse_native(out)


@pytest.mark.parametrize(
    "name", ["msr-hm0-sample.csv", "tencent-cbs-sample.csv.bz2", "systor17-sample.csv.gz", "cloudphysics-w.vscsi"]
)
def test_a_trace_read_in_python_has_the_records_of_trace_convert(cli, traces, tmp_path, name):
    src = traces / name
    recs, names = converted(cli, src, tmp_path)
    t = tiercache.read_trace(src)
    assert t.num_rows == len(recs) > 0
    assert t.column("time_ns").to_numpy().tolist() == recs["time_ns"].tolist()
    assert t.column("offset").to_numpy().tolist() == recs["offset"].tolist()
    assert t.column("length").to_numpy().tolist() == recs["length"].tolist()
    ops = t.column("op").combine_chunks()
    assert ops.indices.to_numpy().tolist() == recs["op"].tolist()
    vol = t.column("volume").combine_chunks()
    assert [names[i] for i in recs["volume"]] == vol.to_pylist()
    assert t.schema.field("time_ns").type == pa.uint64()


def test_batches_are_chunks_of_the_whole_trace(traces):
    src = traces / "msr-hm0-sample.csv"
    whole = tiercache.read_trace(src)
    batches = list(tiercache.iter_trace(src, batch_size=128))
    assert all(b.num_rows <= 128 for b in batches)
    assert len(batches) == -(-whole.num_rows // 128)
    joined = pa.Table.from_batches(batches).unify_dictionaries()
    for c in ("time_ns", "offset", "length"):
        assert joined.column(c).to_pylist() == whole.column(c).to_pylist()
    assert joined.column("op").to_pylist() == whole.column("op").to_pylist()
    df = whole.to_pandas()
    assert set(df["op"].unique()) <= set(tiercache.OPS)


def test_a_malformed_record_raises_the_readers_message(cli, traces, tmp_path):
    lines = (traces / "msr-hm0-sample.csv").read_text().splitlines()
    lines[5] = "128166385295514663,hm,0,Write,notanumber,2048,2833"
    bad = tmp_path / "bad-msr.csv"
    bad.write_text("\n".join(lines) + "\n")
    p = cli("trace", "stats", bad, "--format", "msr", check=False)
    assert p.returncode == 2
    message = p.stderr.strip().splitlines()[-1].removeprefix("tiercache: error: ")
    with pytest.raises(tiercache.InputError) as err:
        tiercache.read_trace(bad, "msr")
    # The command adds its own context (`trace stats FILE: `) before the reader's message.
    assert message.endswith(str(err.value)) and f"{bad}:6: field `offset`" in str(err.value)
    skipped = tiercache.read_trace(bad, "msr", skip_bad=True)
    assert skipped.num_rows == len(lines) - 1


def test_an_unknown_format_name_is_an_input_error(traces):
    with pytest.raises(tiercache.InputError, match="bogus"):
        tiercache.read_trace(traces / "msr-hm0-sample.csv", "bogus")
