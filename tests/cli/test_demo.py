"""Issue 15, item 12: ``chunkstore demo`` removes its data at the end unless ``--keep`` or
``--dir DIR`` is given, and says where the data is or that it was removed."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def run_demo(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "chunkstore", "demo", "--small", "--workers",
                           "1", *args], env=env, capture_output=True, text=True, timeout=300)


def test_demo_removes_its_data_and_says_so(tmp_path):
    result = run_demo(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "transpose matches: True; rechunk matches: True" in result.stdout
    assert "1 array checked: 64 chunks, 0 bad" in result.stdout
    assert "removed the demo data (" in result.stdout and "--keep" in result.stdout
    assert os.listdir(tmp_path / "tmp") == []  # nothing left, not even dask's scratch space
    assert result.stderr.rstrip().splitlines()[-1].startswith("chunkstore demo: all checks "
                                                                 "passed in ")
    assert "\r" not in result.stderr and "Completed" not in result.stderr
    # issue 34: the cluster's dashboard link (bokeh is in the dev extra), and max_mem in the
    # same units in the plans and the summary
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/status$", result.stdout, re.M), \
        result.stdout
    assert result.stderr.count("(max_mem 256 MiB)") == 2, result.stderr
    assert "max_mem 256 MiB per task" in result.stdout


def test_demo_keeps_data_in_dir_and_says_where(tmp_path):
    target = tmp_path / "kept"
    result = run_demo(tmp_path, "--dir", str(target))
    assert result.returncode == 0, result.stderr
    assert f"the demo data is in {target} (" in result.stdout
    assert f"rm -rf {target}" in result.stdout
    assert sorted(os.listdir(target)) == ["demo.zarr"]
