"""The manylinux wheel as a user gets it: installed into a fresh virtualenv (nothing of the
repository on its path), imported from there, and the example notebook executed there from a
directory outside the repository, on a kernel of that virtualenv.

The wheel is the one scripts/build-wheel.sh built (scripts/test.sh passes it as
TIERCACHE_WHEEL; without it, the newest manylinux wheel in target/wheels). Without a wheel
the test is skipped, and fails when CI is set. pip resolves the wheel's declared dependencies
(pandas, pyarrow, and the notebook extra's matplotlib, nbclient, ipykernel) as for a user; the
virtualenv sees the system's site packages, so those scripts/setup.sh installed satisfy them
without a download (fetching pandas and pyarrow took 3-8 minutes of a CI run), while tiercache
itself must come from the wheel installed into the virtualenv (asserted below).
"""

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
NOTEBOOK = REPO / "examples" / "notebooks" / "getting-started.ipynb"


def _wheel():
    env = os.environ.get("TIERCACHE_WHEEL")
    if env:
        return Path(env)
    found = sorted((REPO / "target" / "wheels").glob("tiercache-*manylinux*.whl"), key=lambda p: p.stat().st_mtime)
    if found:
        return found[-1]
    message = "no manylinux wheel: run `bash scripts/build-wheel.sh` (or set TIERCACHE_WHEEL)"
    if os.environ.get("CI"):
        pytest.fail(message + "; CI is set, so this test fails instead of skipping")
    pytest.skip(message)


def test_the_wheel_is_manylinux_and_carries_what_it_links():
    wheel = _wheel()
    assert "manylinux" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tags = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Tag: cp39-abi3-manylinux" in tags, tags
    # The compiled module, the Python half, and the libraries auditwheel copied in.
    assert any(n.startswith("tiercache/_native") and n.endswith(".so") for n in names), names
    assert "tiercache/__init__.py" in names
    if shutil.which("auditwheel"):
        shown = subprocess.run(["auditwheel", "show", str(wheel)], capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr
        said = " ".join(shown.stdout.split())  # auditwheel wraps its lines
        assert 'is consistent with the following platform tag: "manylinux_' in said, said
    # liblzma (compressed traces) is not in any manylinux policy: auditwheel copied it in.
    assert any(n.startswith("tiercache.libs/liblzma") for n in names), names


def test_a_fresh_virtualenv_installs_the_wheel_and_runs_the_notebook(tmp_path):
    wheel = _wheel()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # First the wheel itself into the virtualenv (a tiercache in the system's site packages
    # would otherwise count as installed), then its declared dependencies as pip resolves them.
    for args in (["--no-deps", "--force-reinstall", str(wheel)], [f"{wheel}[notebook]", "nbformat"]):
        pip = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
            capture_output=True,
            text=True,
            env=clean,
        )
        assert pip.returncode == 0, pip.stdout + pip.stderr
    # The notebook runs from a directory outside the repository (its trace fixture is then not
    # found: it makes a synthetic trace), on a kernel registered in the virtualenv itself.
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    kernel = subprocess.run(
        [str(py), "-m", "ipykernel", "install", "--prefix", str(env_dir), "--name", "tiercache-venv"],
        capture_output=True,
        text=True,
        env=clean,
    )
    assert kernel.returncode == 0, kernel.stderr
    runner = work / "run_notebook.py"
    runner.write_text(
        """
import json, sys
import nbformat, nbclient
nb = nbformat.read(sys.argv[1], as_version=4)
# First, say where tiercache was imported from.
nb.cells.insert(0, nbformat.v4.new_code_cell("import sys, tiercache; print(tiercache.__file__); print(sys.prefix)"))
nbclient.NotebookClient(nb, timeout=300, kernel_name="tiercache-venv", resources={"metadata": {"path": sys.argv[2]}}).execute()
code = [c for c in nb.cells if c.cell_type == "code"]
out = {
    "where": code[0].outputs[0]["text"],
    "errors": [o.get("ename") for c in code for o in c.outputs if o.output_type == "error"],
    "images": sum("image/png" in o.get("data", {}) for c in code for o in c.outputs),
    "text": "".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream"),
}
print(json.dumps(out))
"""
    )
    ran = subprocess.run(
        [str(py), str(runner), str(work / NOTEBOOK.name), str(work)],
        capture_output=True,
        text=True,
        cwd=work,
        env={k: v for k, v in clean.items() if k != "TIERCACHE_TRACE"},
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    where, prefix = out["where"].split()
    # Imported from the virtualenv's site-packages, not from the repository.
    assert Path(where).resolve().is_relative_to(env_dir.resolve()), where
    assert not Path(where).resolve().is_relative_to(REPO.resolve()), where
    assert Path(prefix).resolve() == env_dir.resolve(), prefix
    assert out["errors"] == []
    assert out["images"] >= 2
    assert "synthetic.csv" in out["text"], out["text"]
