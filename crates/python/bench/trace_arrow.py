"""Trace reading into Arrow, records per second, against the Rust reader alone.

    python3 crates/python/bench/trace_arrow.py [RECORDS] [DIR]

Writes synthetic native and MSR CSV traces (default 5,000,000 records in /tmp), then for each
reads it (after a warm-up pass) with the Rust reader alone (`_native.bench_read`, the anchor,
as the `bench_read` example) and with `tiercache.iter_trace` into Arrow record batches of 65,536
rows, alternating, three rounds each; prints the best rates and their ratio.
"""

import os
import sys
import tempfile
import time

import tiercache
from tiercache import _native


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    d = sys.argv[2] if len(sys.argv) > 2 else tempfile.gettempdir()
    for fmt, ext in (("native", "tctrace"), ("msr", "csv")):
        path = os.path.join(d, f"tiercache-arrow-bench-{os.getpid()}.{ext}")
        _native.write_synthetic_trace(path, n, fmt)
        try:
            _native.bench_read(path, fmt)
            rust, arrow = 0.0, 0.0
            for _ in range(3):
                recs, secs = _native.bench_read(path, fmt)
                rust = max(rust, recs / secs)
                t = time.perf_counter()
                rows = sum(b.num_rows for b in tiercache.iter_trace(path, fmt))
                arrow = max(arrow, rows / (time.perf_counter() - t))
                assert rows == recs == n
            print(
                f"{fmt:7} {n:,} records: Rust reader {rust / 1e6:6.1f} M rec/s, "
                f"into Arrow {arrow / 1e6:6.1f} M rec/s (ratio {arrow / rust:.2f})"
            )
        finally:
            os.remove(path)


if __name__ == "__main__":
    main()
