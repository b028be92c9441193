"""Issue 34, items 4, 6 and 7: the dashboard link wherever a cluster is made or used, the
demo's free-space check, and the smaller things a newcomer trips over."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.cli import demo, main

from .conftest import DATA

ROOT = Path(__file__).resolve().parents[2]


# -- item 4: dashboard ---------------------------------------------------------------------
def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, response.read()


def test_local_cluster_of_the_cli_prints_a_working_dashboard_link(tmp_path):
    """The demo's cluster (``cluster.local_cluster``; in-process workers to keep it cheap,
    tests/cli/test_demo.py sees the demo print the link with worker processes): its printed
    link answers with the dashboard's page, not "Dask needs bokeh"."""
    pytest.importorskip("bokeh")
    import dask

    from chunkstore.cli.cluster import local_cluster

    stream = io.StringIO()
    with dask.config.set({"temporary-directory": str(tmp_path)}), \
            local_cluster(1, stream, processes=False) as client:
        line = stream.getvalue().strip()
        link = re.fullmatch(r"dashboard: (http://127\.0\.0\.1:\d+/status)", line)
        assert link, line
        assert client.dashboard_link == link[1]
        status, body = _get(link[1])
    assert status == 200 and b"bokeh" in body.lower() and b"needs bokeh" not in body


def test_without_bokeh_the_cli_says_how_to_get_a_dashboard():
    """As after ``pip install chunkstore`` (no bokeh): no dead link, the package to install."""
    code = ("import sys; sys.modules['bokeh'] = None\n"
            "from chunkstore.cli.cluster import local_cluster\n"
            "with local_cluster(1, sys.stdout, processes=False) as client:\n"
            "    print('workers', len(client.scheduler_info()['workers']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "dashboard: none (bokeh is not installed: pip install 'bokeh>=3.1', or the [cluster] "
        "extra of chunkstore)", "workers 1"]


def test_rechunk_on_a_scheduler_prints_its_dashboard_link(tmp_path, capsys):
    pytest.importorskip("bokeh")
    from distributed import LocalCluster

    src = tmp_path / "a.zarr"
    cs.array(DATA, store=str(src), chunks=(4, 30))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        status = main(["rechunk", str(src), str(tmp_path / "b.zarr"), "--chunks", "-1,3",
                       "--scheduler", cluster.scheduler_address])
        err = capsys.readouterr().err
        assert status == 0, err
        assert f"dashboard: {cluster.dashboard_link}\n" in err, err
        assert _get(cluster.dashboard_link)[0] == 200
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "b.zarr"), mode="r")[:], DATA)


def test_a_refused_scheduler_address_fails_at_once(cli, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    result = cli("rechunk", "s.zarr", str(tmp_path / "o.zarr"), "--node", "x", "--chunks",
                 "-1,3", "--scheduler", f"tcp://127.0.0.1:{port}")
    elapsed = time.monotonic() - t0
    assert result.status == 2 and len(result.err_lines) == 1, result.err
    assert f"'tcp://127.0.0.1:{port}': connection refused" in result.err
    assert elapsed < 5, elapsed  # was 10 s: distributed retries until its timeout
    assert not (tmp_path / "o.zarr").exists()


# -- item 6: the demo checks its free disk first --------------------------------------------
def test_demo_without_enough_disk_stops_before_writing(cli, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setitem(demo.DISK_NEEDED, demo.SIDE, 10**15)  # more than any disk here

    def never(*args, **kwargs):
        raise AssertionError("the demo started")
    monkeypatch.setattr(demo, "_run", never)
    result = cli("demo")
    assert result.status == 2 and len(result.err_lines) == 1, result.err
    line = result.err_lines[0]
    assert line.startswith(f"chunkstore demo: error: not enough free disk in {tmp_path}: ")
    assert "the demo needs about 1000 TB" in line
    assert "chunkstore demo --small (about 40 MB)" in line
    assert list(tmp_path.iterdir()) == [] and result.out == ""


def test_demo_disk_needs_are_what_it_writes():
    """The figures the check uses cover the measured sizes (README: about 7.6 GB; the
    --small run of tests/cli/test_demo.py keeps 36 MB)."""
    assert demo.disk_needed(False) == 7_600_000_000 >= 3 * 4 * 2**30 * 0.58
    assert demo.disk_needed(True) == 40_000_000 >= 36_000_000
    readme = (ROOT / "README.md").read_text()
    assert "about 7.6 GB of free disk" in readme and "3-4 minutes" in readme


# -- item 7: smaller ones -------------------------------------------------------------------
def test_traceback_keeps_exit_status_2(cli):
    result = cli("--traceback", "info", "nope.zarr")
    assert result.status == 2 and "Traceback (most recent call last)" in result.err
    assert result.err_lines[-1].startswith("chunkstore info: error: nope.zarr: no such file")


def test_convert_help_names_convert(cli):
    result = cli("convert", "--help")
    assert result.status == 0 and result.out.startswith("usage: chunkstore convert ")
    assert cli("copy", "--help").out.startswith("usage: chunkstore copy ")


def test_tree_level_counts_levels_in_the_users_terms(cli):
    assert cli("tree", "s.zarr", "--level", "1").out.splitlines() == [
        "/", "├── sub", "└── x (20, 30) int32"]
    assert cli("tree", "s.zarr", "--level", "2").out.splitlines() == [
        "/", "├── sub", "│   └── z (4,) float64", "└── x (20, 30) int32"]
    for bad in ("-1", "0"):
        result = cli("tree", "s.zarr", "--level", bad)
        assert result.status == 2 and "max_depth" not in result.err
        assert f"argument --level: must be at least 1, got {bad}" in result.err


@pytest.mark.parametrize(("value", "words"), [
    ("-5", "must be at least 1, got -5"), ("0", "must be at least 1, got 0"),
    ("many", "expected a whole number, got 'many'")])
def test_dump_max_elements_must_be_positive(cli, value, words):
    result = cli("dump", "s.zarr", "--node", "x", "--max-elements", value)
    assert result.status == 2 and f"argument --max-elements: {words}" in result.err
    assert result.out == ""


def test_strings_and_groups_in_info(cli, tmp_path):
    path = tmp_path / "g.zarr"
    root = cs.group(str(path))
    root.create_array("names", shape=(3,), dtype=str)[:] = ["a", "b", "c"]
    root.create_group("sub")
    rows = {k.strip(): v for k, v in (line.split(" : ", 1)
                                      for line in cli("info", str(path), "--node",
                                                      "names").out.splitlines())}
    assert rows["Data type"] == "string"
    assert cs.open_array(str(path), mode="r", path="names").info["Data type"] == "string"
    assert cli("ls", str(path)).out.split()[3] == "string"
    assert "names (3,) string" in cli("tree", str(path)).out
    assert "  data type        string" in cli("dump", str(path), "--node", "names").out
    rows = {k.strip(): v for k, v in (line.split(" : ", 1)
                                      for line in cli("info", str(path)).out.splitlines())}
    assert rows["Members"] == "1 array, 1 group: names, sub/"
    assert rows["Consolidated"].startswith("no ")
    cs.consolidate_metadata(str(path))
    rows = {k.strip(): v for k, v in (line.split(" : ", 1)
                                      for line in cli("info", str(path)).out.splitlines())}
    assert rows["Consolidated"].startswith("yes ")


def test_open_of_nothing_says_nothing(tmp_path):
    with pytest.raises(cs.errors.NodeNotFoundError,
                       match=r"^nothing at path '/' in LocalStore\(.*nope\.zarr'\): no Zarr "
                             r"array or group there$"):
        cs.open(str(tmp_path / "nope.zarr"), mode="r")
    assert not (tmp_path / "nope.zarr").exists()


def test_memory_targets_are_warned_about(cli):
    name = f"memory://newcomer-{os.getpid()}-{time.monotonic_ns()}"
    result = cli("copy", "s.zarr", f"{name}/a.zarr", "--node", "x")
    assert result.status == 0
    assert (f"chunkstore copy: warning: {name}/a.zarr is in the memory of this command's "
            "process: what is written there is gone when the command exits") in result.err
    result = cli("rechunk", "s.zarr", f"{name}/b.zarr", "--node", "x", "--chunks", "-1,3")
    assert result.status == 0 and f"warning: {name}/b.zarr is in the memory" in result.err
    assert "warning" not in cli("copy", "s.zarr", "unused.npy", "--node", "x",
                                "--overwrite").err


def test_s3_without_a_client_suggests_the_obstore_extra(samples):
    """Neither obstore nor s3fs importable (as after ``pip install chunkstore``): reading
    (info) and writing (copy, rechunk) an s3:// URL say what the README recommends."""
    code = ("import sys; sys.modules['s3fs'] = sys.modules['obstore'] = None\n"
            "from chunkstore.cli import main\n"
            "for argv in (['info', 's3://bucket/x.zarr'],\n"
            "             ['copy', 's.zarr', 's3://bucket/x.zarr', '--node', 'x'],\n"
            "             ['rechunk', 's.zarr', 's3://bucket/x.zarr', '--node', 'x',\n"
            "              '--chunks', '5,5']):\n"
            "    print(main(argv))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=samples, timeout=120)
    assert result.stdout.split() == ["2", "2", "2"], result.stderr
    assert result.stderr.splitlines() == [
        f"chunkstore {command}: error: s3://bucket/x.zarr: s3:// URLs need an S3 client, and "
        "neither obstore nor s3fs is installed (pip install 'chunkstore[obstore]', or "
        "'chunkstore[s3]' for s3fs)" for command in ("info", "copy", "rechunk")]


def _code_cells(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def test_tour_and_notebooks_use_no_deprecated_call():
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A quick tour", 1)[1].split("## ", 1)[0]
    assert "create_dataset(" not in tour and "create_array(\"group_2/array_1D_2\"" in tour
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert ".create_dataset(" not in _code_cells(path), path.name
    # dask.array.from_zarr takes zarr-python arrays only: the tour points to from_store
    assert "not dask.array.from_zarr" in tour


def test_xarray_engine_takes_cache_members(tmp_path):
    xr = pytest.importorskip("xarray")
    path = str(tmp_path / "x.zarr")
    cs.array(DATA, store=path, path="v", dimension_names=["y", "x"])
    for engine in ("chunkstore", None):  # picked by default once installed
        ds = xr.open_dataset(path, engine=engine, cache_members=False)
        np.testing.assert_array_equal(ds["v"].values, DATA)
    tree = xr.open_datatree(path, engine="chunkstore", cache_members=True)
    np.testing.assert_array_equal(tree["v"].values, DATA)
    with pytest.raises(TypeError, match="cache_members must be True or False"):
        xr.open_dataset(path, engine="chunkstore", cache_members="yes")


def test_benchmark_credential_files_are_removed_at_exit(tmp_path):
    code = ("import os; from benchmarks.s3_endpoint import set_aws_env\n"
            "set_aws_env(); first = os.environ['AWS_SHARED_CREDENTIALS_FILE']\n"
            "set_aws_env(); assert os.environ['AWS_SHARED_CREDENTIALS_FILE'] == first\n"
            "print(first, open(first).read().count('testing'))")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("AWS_SHARED_CREDENTIALS_FILE", None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    path, count = result.stdout.split()
    assert Path(path).parent.parent == tmp_path and count == "2"  # it was there, once
    assert list(tmp_path.iterdir()) == []  # and it is gone
