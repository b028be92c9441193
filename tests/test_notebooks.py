"""Execute the notebooks in notebooks/ (small sizes: ``CI=1``) and fail on any cell error.

The kernel is this interpreter (the project's virtual environment), registered as a
temporary kernelspec so no global Jupyter setup is needed. The notebooks are committed
without outputs; they run in a temporary working directory.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
KERNEL = "chunkstore-test-venv"
# Settings that would point a notebook at a real cluster or bucket: blank them for the test.
CLUSTER_VARS = ("CHUNKSTORE_SCHEDULER", "DASK_SCHEDULER_ADDRESS", "CHUNKSTORE_STORE",
                "CHUNKSTORE_S3_ENDPOINT", "AWS_ENDPOINT_URL", "CHUNKSTORE_ARRAY_GIB")


@pytest.fixture
def kernel_tmp(tmp_path) -> Path:
    """The kernel's temporary directory (TMPDIR): what a notebook leaves there stays."""
    path = tmp_path / "kernel-tmp"
    path.mkdir()
    return path


@pytest.fixture
def venv_kernel(tmp_path, kernel_tmp, monkeypatch):
    """Make a kernelspec running ``sys.executable`` with ``CI=1`` (plus ``env``) and its
    own TMPDIR, found through JUPYTER_PATH; returns its name."""
    for name in CLUSTER_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))

    def make(**env: str) -> str:
        spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
        spec_dir.mkdir(parents=True, exist_ok=True)
        kernel_env = {"CI": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                      "TMPDIR": str(kernel_tmp), **{name: "" for name in CLUSTER_VARS}, **env}
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "chunkstore venv", "language": "python", "env": kernel_env}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        return KERNEL

    return make


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
    return [o for cell in nb.cells if cell.cell_type == "code"
            for o in cell.get("outputs", []) if o.get("output_type") == kind
            or kind in o.get("data", {})]


def test_runner_uses_the_venv_with_ci_and_reports_cell_errors(venv_kernel, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os, sys; print(sys.executable, os.environ['CI'], "
                                  "repr(os.environ['CHUNKSTORE_SCHEDULER']))"),
        nbformat.v4.new_code_cell("raise RuntimeError('boom from a cell')"),
        nbformat.v4.new_code_cell("print('never runs')"),
    ])
    with pytest.raises(pytest.fail.Exception, match="boom from a cell"):
        run_notebook(tmp_path / "failing.ipynb", venv_kernel(), tmp_path, nb=nb)
    assert nb.cells[0].outputs[0]["text"].split() == [sys.executable, "1", "''"]
    assert not nb.cells[2].outputs


def test_notebooks_are_committed_without_outputs():
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.name for p in paths} >= {"getting_started.ipynb", "larger_than_memory.ipynb"}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, (
                    f"{path.name}: strip the outputs before committing")


def stream_text(nb) -> str:
    return "".join(o.get("text", "") for o in outputs_of(nb, "stream"))


def test_larger_than_memory(venv_kernel, tmp_path, kernel_tmp):
    """CI size: the array is larger than the cluster's memory limit, the memory plot has
    many samples per worker, each worker stays under its limit; nothing is left behind."""
    nb = run_notebook(NOTEBOOKS / "larger_than_memory.ipynb", venv_kernel(), tmp_path)
    # the plots were drawn (overview/histogram/profile and the memory plot)
    assert len(outputs_of(nb, "image/png")) >= 2
    text = stream_text(nb)
    assert "RechunkPlan" in text and "transposed" in text
    ratio = float(re.search(r"= ([\d.]+)x the cluster's memory limit", text)[1])
    samples = int(re.search(r"(\d+) memory samples", text)[1])
    limit = int(re.search(r"limit (\d+) MiB per worker", text)[1])
    peaks = [int(p) for line in re.findall(r"peak per worker: ([\d, ]+) MiB", text)
             for p in line.split(",")]
    assert ratio > 1 and samples >= 100 and len(peaks) == 8
    assert max(peaks) < limit, text
    assert list(kernel_tmp.iterdir()) == []


def test_larger_than_memory_at_the_documented_quick_size(venv_kernel, tmp_path, kernel_tmp):
    """``CHUNKSTORE_ARRAY_GIB=0.25`` outside CI (issue 15, item 11)."""
    kernel = venv_kernel(CI="", CHUNKSTORE_ARRAY_GIB="0.25")
    text = stream_text(run_notebook(NOTEBOOKS / "larger_than_memory.ipynb", kernel, tmp_path))
    assert "array (6144, 6144) float64" in text and "smaller than the cluster's memory" in text
    assert list(kernel_tmp.iterdir()) == []


def test_failing_notebook_still_removes_its_temporary_directory(venv_kernel, tmp_path,
                                                                 kernel_tmp):
    nb = nbformat.read(NOTEBOOKS / "larger_than_memory.ipynb", as_version=4)
    nb.cells = [*nb.cells[:2], nbformat.v4.new_code_cell("raise RuntimeError('stop here')")]
    with pytest.raises(pytest.fail.Exception, match="stop here"):
        run_notebook(tmp_path / "stops.ipynb", venv_kernel(), tmp_path, nb=nb)
    assert list(kernel_tmp.iterdir()) == []


def test_getting_started(venv_kernel, tmp_path, kernel_tmp, s3_bucket):
    """Also runs the notebook's S3 cell against a moto server, as docker-compose's MinIO."""
    url, options = s3_bucket
    kernel = venv_kernel(CHUNKSTORE_S3_ENDPOINT=options["client_kwargs"]["endpoint_url"],
                         CHUNKSTORE_BUCKET=url.removeprefix("s3://"),
                         AWS_ACCESS_KEY_ID=options["key"], AWS_SECRET_ACCESS_KEY=options["secret"],
                         AWS_DEFAULT_REGION="us-east-1")
    nb = run_notebook(NOTEBOOKS / "getting_started.ipynb", kernel, tmp_path)
    text = stream_text(nb)
    assert "group_1" in text  # the tree of the hierarchy was printed
    assert f"FsspecStore('{url}/getting-started/hello.zarr')" in text
    assert list(kernel_tmp.iterdir()) == []
