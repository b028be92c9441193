"""Execute the notebooks in notebooks/ (small sizes: ``CI=1``) and fail on any cell error.

The kernel is this interpreter (the project's virtual environment), registered as a
temporary kernelspec so no global Jupyter setup is needed. The notebooks are committed
without outputs; they run in a temporary working directory.
"""

from __future__ import annotations

import re
import sys

import pytest

from chunkstore.storage.obstore.setup import available as obstore_available
from tests.notebook_helpers import NOTEBOOKS, nbformat, outputs_of, run_notebook, stream_text

pytestmark = pytest.mark.starts_first  # a real cluster or server: see tests/conftest.py


def test_runner_uses_the_venv_with_ci_and_reports_cell_errors(venv_kernel, tmp_path,
                                                              kernel_tmp):
    """The kernel is this interpreter with ``CI=1`` and no scheduler; a cell error fails
    the run and stops it; and larger_than_memory.ipynb's setup cell (which made its
    temporary directory) ahead of the failing cell still leaves nothing behind (one kernel
    for both proofs)."""
    nb = nbformat.read(NOTEBOOKS / "larger_than_memory.ipynb", as_version=4)
    nb.cells = [*nb.cells[:2], nbformat.v4.new_code_cell(
        "import os, sys; print(sys.executable, os.environ['CI'], "
        "repr(os.environ['CHUNKSTORE_SCHEDULER']))"),
        nbformat.v4.new_code_cell("raise RuntimeError('boom from a cell')"),
        nbformat.v4.new_code_cell("print('never runs')"),
    ]
    with pytest.raises(pytest.fail.Exception, match="boom from a cell"):
        run_notebook(tmp_path / "failing.ipynb", venv_kernel(), tmp_path, nb=nb)
    assert f"store={kernel_tmp}/chunkstore-larger-than-memory-" in nb.cells[1].outputs[0]["text"]
    assert nb.cells[2].outputs[0]["text"].split() == [sys.executable, "1", "''"]
    assert not nb.cells[4].outputs
    assert list(kernel_tmp.iterdir()) == []


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
    assert "Warning" not in text, text  # e.g. no DeprecationWarning from create_dataset
    # s3:// URLs: obstore when installed (the options translate), else fsspec
    backend = "ObstoreStore" if obstore_available() else "FsspecStore"
    assert f"{backend}('{url}/getting-started/hello.zarr')" in text
    assert list(kernel_tmp.iterdir()) == []
