"""The Python page of the user guide (docs/guide/src/python.md): its `python tested` blocks run
in order, in one namespace, from a scratch directory holding the repository's `examples/` and
`fixtures/` as a checkout does, against the installed package."""

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "guide" / "src" / "python.md"


def python_blocks(text):
    return [
        m.group(2)
        for m in re.finditer(r"^```(python[^\n]*)\n(.*?)^```", text, re.S | re.M)
        if "tested" in m.group(1).split()
    ]


def test_the_python_page_runs(tmp_path, monkeypatch):
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) >= 4, "the page lost its tested blocks"
    for d in ("examples", "fixtures"):
        os.symlink(REPO / d, tmp_path / d)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{PAGE.name} block {i + 1}", "exec"), namespace)
