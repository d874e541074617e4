"""The example notebook runs from top to bottom (its cells assert what they show)."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient


def test_quickstart_notebook_executes(repo):
    path = repo / "python" / "examples" / "quickstart.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors


def test_sweep_notebook_executes(repo):
    """`examples/sweep.ipynb` reproduces four rows of docs/results.md's benchmark table."""
    path = repo / "python" / "examples" / "sweep.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
