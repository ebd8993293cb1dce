"""The example notebook executes top to bottom (nbclient, a python3 kernel)."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[3] / "examples" / "notebooks" / "getting-started.ipynb"


def test_the_notebook_runs_top_to_bottom(traces, monkeypatch):
    monkeypatch.setenv("TIERCACHE_TRACE", str(traces / "msr-hm0-sample.csv"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("outputs") is not None for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    # The figures were drawn (MRC/reuse and sweep plots).
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2
