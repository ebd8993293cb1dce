"""The Ray executor's driver: ``tiercache sweep SPEC --ray [ADDRESS]`` starts it (``python -m
tiercache.ray_driver --address ADDRESS``) and hands it points; it runs each as one Ray task
(the tiercache library's simulator, inside :func:`tiercache._native.simulate_point`) and sends
back the record.

The sweep runner stays the local one (crates/sweep): it decides which points are pending,
appends each result to the results files as it arrives, resumes, and draws progress. This
process only moves points to the cluster and results back.

Protocol (JSON lines on stdin/stdout): first ``{"cpus": N}`` (the cluster's CPUs) or
``{"error": "..."}``; then for each ``{"id": K, "point": PAYLOAD}`` read, one
``{"id": K, "record": {...}}`` or ``{"id": K, "error": "..."}`` when it finished, in any
order. A task whose worker dies (a crash, a lost node) is retried by Ray up to ``--retries``
times; a point whose run fails (a bad config) is not retried here: its error is its result, as
with the local runner. When stdin closes the driver exits (tasks still in flight are
cancelled with it).

``TIERCACHE_RAY_FAULT_DIR`` (for tests): when set, the first attempt of every point kills its
worker process (after leaving a marker file named by the point id in that directory), so
every point exercises Ray's retry of a crashed task.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading


def _run_point(payload: str, fault_dir):
    """One sweep point, on a Ray worker: the record as JSON text, or ``("error", message)``."""
    from tiercache import _native

    if fault_dir:
        marker = os.path.join(fault_dir, json.loads(payload)["id"])
        if not os.path.exists(marker):
            with open(marker, "w"):
                pass
            os._exit(1)  # the worker dies mid-task: Ray must retry the task elsewhere
    try:
        return ("record", _native.simulate_point(payload))
    except _native.TiercacheError as e:
        return ("error", str(e))


def _unreachable(address: str):
    """Why a HOST:PORT address cannot be a Ray cluster (nothing accepts connections there), or
    None. Checked first because ray.init retries an unreachable address for minutes."""
    import socket

    if address in ("auto", "local") or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        return f"nothing accepts connections at {host}:{port} ({e.strerror or e})"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiercache.ray_driver", description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", default="auto", help="Ray cluster address for ray.init ('local': start one)")
    ap.add_argument("--retries", type=int, default=3, help="Ray retries of a task whose worker died")
    args = ap.parse_args(argv)

    # Replies go to the real stdout; anything a library prints goes to stderr instead.
    out = sys.stdout
    sys.stdout = sys.stderr
    lock = threading.Lock()

    def emit(obj_text: str) -> None:
        with lock:
            out.write(obj_text + "\n")
            out.flush()

    try:
        import ray
    except ImportError as e:
        emit(json.dumps({"error": f"Ray is not installed in {sys.executable} ({e}): pip install 'ray[default]'"}))
        return 2
    unreachable = _unreachable(args.address)
    if unreachable:
        emit(json.dumps({"error": f"cannot connect to a Ray cluster at `{args.address}`: {unreachable}"}))
        return 2
    try:
        import logging

        ray.init(
            address=None if args.address == "local" else args.address,
            log_to_driver=False,
            logging_level=logging.WARNING,
            include_dashboard=False if args.address == "local" else None,
        )
    except Exception as e:  # noqa: BLE001 - any failure to connect is reported as the driver's error
        emit(json.dumps({"error": f"cannot connect to a Ray cluster at `{args.address}`: {e}"}))
        return 2
    cpus = int(ray.cluster_resources().get("CPU", 1))
    emit(json.dumps({"cpus": max(cpus, 1)}))

    task = ray.remote(num_cpus=1, max_retries=args.retries, retry_exceptions=False)(_run_point)
    fault_dir = os.environ.get("TIERCACHE_RAY_FAULT_DIR") or None

    incoming: "queue.Queue[str | None]" = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip():
                incoming.put(line)
        incoming.put(None)

    threading.Thread(target=read_stdin, daemon=True).start()

    in_flight = {}  # ObjectRef -> point id
    closed = False
    while not closed or in_flight:
        # Take every point waiting; block only when nothing runs.
        while True:
            try:
                line = incoming.get(block=not in_flight and not closed, timeout=None if not in_flight else 0)
            except queue.Empty:
                break
            if line is None:
                closed = True
                break
            msg = json.loads(line)
            payload = json.dumps(msg["point"])
            in_flight[task.remote(payload, fault_dir)] = msg["id"]
        if not in_flight:
            continue
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.05)
        for ref in ready:
            point = in_flight.pop(ref)
            try:
                kind, value = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a task Ray gave up on fails its point
                emit(json.dumps({"id": point, "error": f"Ray: {type(e).__name__}: {e}"}))
                continue
            if kind == "record":
                emit('{"id": %d, "record": %s}' % (point, value))
            else:
                emit(json.dumps({"id": point, "error": value}))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
