"""LocalStore housekeeping under concurrency: directory creation and pruning races,
temporary files of killed writers and their sweeping, locations; and what
``resolve_store`` accepts (``file://`` URLs, memory sizes refused)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import pytest

from chunkstore.storage import FsspecStore, InvalidStoreError, LocalStore, ZipStore
from chunkstore.storage.base import ABSENT
from chunkstore.storage.local.temp import HOST_TAG, TEMP_PREFIX, temp_name
from chunkstore.storage.resolve import resolve_store


def _churn(root: str, worker: int, rounds: int) -> None:
    """Create keys in shared directories and delete them again (the deleter prunes the
    directory it emptied while the others create files in it)."""
    st = LocalStore(root)
    for n in range(rounds):
        key = f"c/{n % 3}/{worker}-{n}"
        if n % 2:
            assert st.commit_many([(key, b"x", ABSENT)]) == [True]
        else:
            st.set(key, b"x")
        assert st.get(key) == b"x"
        st.delete(key)


def test_directories_created_and_pruned_concurrently(tmp_path):
    root = str(tmp_path / "r")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_churn, args=(root, w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert list(LocalStore(root).list()) == []
    leftovers = [f for _, _, files in os.walk(root) for f in files]
    assert leftovers == []


def _write_forever(root: str) -> None:
    st = LocalStore(root)
    value = bytes(range(256)) * (2**18)  # 64 MiB: a write lasts long enough to be hit
    while True:
        st.set("c/0", value)


def test_killed_writers_leave_temp_files_that_sweep_removes(tmp_path):
    root = tmp_path / "r"
    LocalStore(str(root)).set("c/0", b"old")  # a committed value the writers replace
    ctx = mp.get_context("fork")
    for attempt in range(40):
        proc = ctx.Process(target=_write_forever, args=(str(root),))
        proc.start()
        time.sleep(0.2 + 0.013 * attempt)  # vary the moment of the kill
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        temps = [n for n in os.listdir(root / "c") if n.startswith(TEMP_PREFIX)]
        if temps:
            break
    assert temps, "no kill landed mid-write in 40 tries"
    assert all(n.startswith(f"{TEMP_PREFIX}{HOST_TAG}-") for n in temps)
    st = LocalStore(root)
    assert list(st.list()) == ["c/0"]  # listings never show temporary files
    assert st.sweep_temp(older_than=3600) == len(temps)
    assert os.listdir(root / "c") == ["0"]


def _temp(directory: Path, name: str, age: float = 0.0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"partial")
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


def _dead_pid() -> int:
    proc = mp.get_context("fork").Process(target=os._exit, args=(0,))
    proc.start()
    proc.join()
    return proc.pid


def test_sweep_tells_dead_and_old_from_live(tmp_path):
    root = tmp_path / "r"
    st = LocalStore(root)
    st.set("a/k", b"v")
    dead = _temp(root / "a", f"{TEMP_PREFIX}{HOST_TAG}-{_dead_pid()}-1-1")
    live = _temp(root / "a", temp_name())  # this process: alive
    foreign = _temp(root / "b", f"{TEMP_PREFIX}0badc0de-{os.getpid()}-1-1")  # other host
    old = _temp(root / "only/temp", f"{TEMP_PREFIX}0badc0de-1-1-1", age=7200)
    legacy = _temp(root / "a", f"{TEMP_PREFIX}123-456-7", age=7200)  # an older name form
    assert st.sweep_temp("a/b") == 0  # nothing below that prefix
    assert st.sweep_temp() == 3
    assert not dead.exists() and not old.exists() and not legacy.exists()
    assert live.exists() and foreign.exists()
    assert not (root / "only").exists()  # a directory left empty by the sweep is pruned
    assert st.sweep_temp(older_than=0) == 2 and list(st.list()) == ["a/k"]


def test_delete_prefix_sweeps_stale_temps_below_it(tmp_path):
    root = tmp_path / "r"
    st = LocalStore(root)
    st.set_many({"x/c/0": b"0", "y/c/0": b"0"})
    _temp(root / "x" / "c", f"{TEMP_PREFIX}{HOST_TAG}-{_dead_pid()}-1-1")
    keep = _temp(root / "y" / "c", f"{TEMP_PREFIX}{HOST_TAG}-{_dead_pid()}-1-1")
    st.delete_prefix("x")
    assert not (root / "x").exists()  # its temp file went with it, then the directories
    assert keep.exists()  # not below the prefix


def test_read_only_store_does_not_sweep(tmp_path):
    st = LocalStore(tmp_path / "r", read_only=True)
    with pytest.raises(PermissionError):
        st.sweep_temp()


def test_locations_name_the_real_directory(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    a = LocalStore(tmp_path / "real" / "x.zarr")
    assert a.location() == ("file", os.path.realpath(tmp_path / "real" / "x.zarr"))
    assert LocalStore(tmp_path / "alias" / "x.zarr").location() == a.location()
    assert FsspecStore(f"file://{tmp_path}/alias/x.zarr").location() == a.location()
    assert resolve_store(f"file://{tmp_path}/real/x.zarr").location() == a.location()
    assert LocalStore(tmp_path / "real" / "y.zarr").location() != a.location()
    m = FsspecStore("memory://loc/x.zarr")
    assert m.location() == ("memory", "/loc/x.zarr", None)


def test_file_urls_resolve_to_confined_stores(tmp_path):
    st = resolve_store(f"file://{tmp_path}/u.zarr")
    assert isinstance(st, LocalStore) and st.root == tmp_path / "u.zarr"
    assert st.capabilities.conditional_writes
    assert isinstance(resolve_store(f"file://{tmp_path}/u.zip", mode="w"), ZipStore)
    assert resolve_store(f"file://{tmp_path}/u.zarr", mode="r").read_only
    with pytest.raises(TypeError, match="storage_options"):
        resolve_store(f"file://{tmp_path}/u.zarr", storage_options={"auto_mkdir": True})


@pytest.mark.parametrize("size", ["64MB", "1GiB", "200KB", "1.5 GB", "512k"])
def test_memory_size_where_a_store_belongs_is_refused(size, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidStoreError, match="looks like a memory size"):
        resolve_store(size, mode="w")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("path", ["./64MB", "64MB.zarr", Path("64MB")])
def test_paths_that_merely_resemble_sizes_are_allowed(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert isinstance(resolve_store(path), LocalStore)


def test_batches_over_many_directories_hold_few_descriptors(tmp_path):
    """A batch touching thousands of directories runs under a low descriptor limit."""
    import subprocess
    import sys

    code = f"""
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from chunkstore.storage import LocalStore
from chunkstore.storage.base import ANY
st = LocalStore({str(tmp_path / "r")!r})
items = {{f"c/{{i}}/{{j}}/0": b"x" for i in range(40) for j in range(40)}}
st.set_many(items)
keys = list(items)
assert st.get_many(keys) == [b"x"] * len(keys)
assert [bytes(v) for v in st.get_views(keys)] == [b"x"] * len(keys)
assert st.get_ranges([(k, (0, 1)) for k in keys]) == [b"x"] * len(keys)
assert [v for v, _ in st.get_versioned_many(keys)] == [b"x"] * len(keys)
assert st.commit_many([(k, None, ANY) for k in keys[::2]]) == [True] * (len(keys) // 2)
assert len(list(st.list())) == len(keys) // 2
st.delete_prefix("c")
assert list(st.list()) == []
"""
    repo = str(Path(__file__).resolve().parents[3])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=repo, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert os.listdir(tmp_path / "r") == []


def test_fifo_at_a_key_reads_as_missing_and_never_blocks(tmp_path):
    st = LocalStore(tmp_path / "r")
    st.set("c/1", b"one")
    os.mkfifo(tmp_path / "r" / "c" / "0")  # nobody will ever write to it
    assert st.get("c/0") is None and st.get_many(["c/0", "c/1"]) == [None, b"one"]
    assert st.get_views(["c/0"]) == [None] and st.get_ranges([("c/0", (0, 2))]) == [None]
    assert st.get_versioned("c/0") == (None, ABSENT) and not st.exists("c/0")
    assert st.set_if("c/0", b"zero", ABSENT)  # replaces the FIFO
    assert st.get("c/0") == b"zero"


def test_directory_at_a_key_is_a_store_error_naming_it(tmp_path):
    from chunkstore.storage import StoreError

    st = LocalStore(tmp_path / "r")
    (tmp_path / "r" / "c" / "0").mkdir(parents=True)
    assert st.get("c/0") is None and st.get_versioned("c/0") == (None, ABSENT)
    for write in (lambda: st.set("c/0", b"x"), lambda: st.set_if("c/0", b"x", ABSENT)):
        with pytest.raises(StoreError, match="'c/0'"):
            write()
    assert os.listdir(tmp_path / "r" / "c") == ["0"]  # no temporary file left
    st.delete("c/0")  # not a key: nothing to delete
    assert (tmp_path / "r" / "c" / "0").is_dir()


@pytest.mark.parametrize("chain", ["simplecache::file://", "filecache::file://",
                                   "simplecache::"])
def test_cached_local_urls_resolve_to_local_stores(tmp_path, chain):
    st = resolve_store(f"{chain}{tmp_path}/c.zarr")
    assert isinstance(st, LocalStore) and st.root == tmp_path / "c.zarr"
