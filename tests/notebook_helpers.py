"""Running a notebook in the test kernel (the ``venv_kernel`` fixture of tests/conftest.py)
and reading its outputs; shared by tests/notebooks/test_notebooks.py and tests/notebooks/test_cluster_notebook.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def run_notebook(path: Path, kernel: str, workdir: Path, nb=None):
    """Execute the notebook at ``path`` (or ``nb``, modified in place) in ``workdir``."""
    nb = nbformat.read(path, as_version=4) if nb is None else nb
    client = nbclient.NotebookClient(nb, kernel_name=kernel, timeout=300,
                                     resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{path.name}: a cell failed:\n{e}", pytrace=False)
    return nb


def outputs_of(nb, kind: str) -> list:
    """The outputs of the code cells of ``nb`` of type ``kind`` or with data of that type."""
    return [o for cell in nb.cells if cell.cell_type == "code"
            for o in cell.get("outputs", []) if o.get("output_type") == kind
            or kind in o.get("data", {})]


def stream_text(nb) -> str:
    """Everything the cells of ``nb`` printed (stdout and stderr), concatenated."""
    return "".join(o.get("text", "") for o in outputs_of(nb, "stream"))
