"""LocalStore.commit_session: one write's runs share the directories they commit into.

Each directory is opened once for the whole write, every descriptor is closed when the
write ends (never under a run still using it), the commit lock still excludes the
session's own threads (which share its descriptors, and so ``flock``'s lock), and a
session never holds more directories than its bound.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

import chunkstore as cs
from chunkstore.storage import LocalStore
from chunkstore.storage.base import ABSENT
from chunkstore.storage.local import commit as local_commit
from chunkstore.storage.local import paths as local_paths
from chunkstore.storage.local import session as local_session
from chunkstore.storage.local.session import SharedWalk


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def count_dir_opens(monkeypatch) -> list[str]:
    """Record the name of every directory that the store's path layer opens."""
    opened: list[str] = []
    real_open = os.open

    def recording(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & os.O_DIRECTORY:
            opened.append(os.fspath(path))
        return fd

    monkeypatch.setattr(local_paths.os, "open", recording)
    return opened


def test_a_write_opens_each_directory_once_and_closes_all(tmp_path, monkeypatch):
    x = np.random.default_rng(0).random((64, 64))
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=x.shape, chunks=(8, 8), dtype="f8",
                        compressors=None)
    a[:8] = x[:8]  # the array exists, and so does c/0
    before = open_fds()
    opened = count_dir_opens(monkeypatch)
    a[...] = x  # 64 chunks in 8 directories c/0 .. c/7, committed in many runs
    monkeypatch.undo()
    rows = [name for name in opened if name.isdigit()]
    assert sorted(rows) == [str(i) for i in range(8)]  # each row directory once
    assert opened.count("c") == 1
    assert open_fds() == before
    np.testing.assert_array_equal(a[...], x)


def test_without_a_session_each_commit_opens_its_directories(tmp_path, monkeypatch):
    """The control: plain ``commit_many`` calls open the directory every time."""
    store = LocalStore(tmp_path / "s")
    store.set("c/0/0", b"x")
    opened = count_dir_opens(monkeypatch)
    for i in range(5):
        store.commit_many([(f"c/0/{i}", b"y", store.get_versioned(f"c/0/{i}")[1])])
    monkeypatch.undo()
    assert opened.count("0") >= 5


def test_session_threads_exclude_each_other_under_the_commit_lock(tmp_path, monkeypatch):
    """Counters incremented by compare-and-swap from 6 threads of one session: no
    increment is lost although all threads commit through the same directory
    descriptor (a check held open long enough for the others to try to slip in)."""
    store = LocalStore(tmp_path / "s")
    store.set("c/n", b"0")
    real = local_commit.unchanged

    def slow(generation, open_target):
        ok = real(generation, open_target)
        time.sleep(0.002)  # between this check and the rename
        return ok

    monkeypatch.setattr(local_commit, "unchanged", slow)
    per_thread, threads = 15, 6
    errors: list[BaseException] = []
    with store.commit_session() as commit:
        def bump() -> None:
            try:
                for _ in range(per_thread):
                    while True:
                        value, generation = store.get_versioned("c/n")
                        if commit([("c/n", str(int(value) + 1).encode(), generation)])[0]:
                            break
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        workers = [threading.Thread(target=bump) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    assert not errors
    assert store.get("c/n") == str(per_thread * threads).encode()


def test_session_bound_falls_back_to_own_walks(tmp_path, monkeypatch):
    """With room for 3 directories, a write into 8 row directories still lands whole,
    and nothing stays open."""
    monkeypatch.setattr(local_session, "DIRS_PER_SLICE", 3)
    x = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    a = cs.create_array(str(tmp_path / "b.zarr"), shape=x.shape, chunks=(8, 8), dtype="i4",
                        compressors=None)
    before = open_fds()
    opened = count_dir_opens(monkeypatch)
    a[...] = x
    monkeypatch.undo()
    rows = [name for name in opened if name.isdigit()]
    assert sorted(set(rows)) == [str(i) for i in range(8)]
    assert len(rows) > 8  # rows beyond the bound were opened by their own commits
    assert open_fds() == before
    np.testing.assert_array_equal(a[...], x)


def test_ended_session_closes_its_walk_only_after_the_last_borrower(tmp_path):
    root = local_paths.Root(str(tmp_path))
    shared = SharedWalk(lambda: root.walk("owner", create=True), limit=4)
    with shared.borrow(["c/0"], create=True) as walk:
        assert walk is not None
        fd = walk.dir("c/0", "c/0/0", create=True)
        shared.end()
        os.fstat(fd)  # still open: a run is using it
        with shared.borrow(["c/0"], create=True) as late:
            assert late is None  # the session has ended: new commits use their own
    assert walk.open_dirs == 0  # closed by the last borrower
    with shared.borrow(["c/1"], create=True) as after:
        assert after is None


def test_session_refuses_more_directories_than_its_bound(tmp_path):
    root = local_paths.Root(str(tmp_path))
    shared = SharedWalk(lambda: root.walk("owner", create=True), limit=3)
    with shared.borrow(["c/0"], create=True) as first:  # c and c/0
        assert first is not None
    with shared.borrow(["c/0", "c/1"], create=True) as second:  # one more: c/1
        assert second is first
    with shared.borrow(["c/2"], create=True) as third:  # a fourth directory
        assert third is None
    with shared.borrow(["c/1"], create=True) as known:  # already counted
        assert known is first
    shared.end()


def test_deletes_only_never_open_a_shared_walk(tmp_path):
    """A session whose first commit only deletes does not make the store's root."""
    store = LocalStore(tmp_path / "missing")
    with store.commit_session() as commit:
        assert commit([("c/0/0", None, ABSENT)]) == [True]
    assert not (tmp_path / "missing").exists()


def test_a_subclass_commit_many_is_used_by_sessions(tmp_path):
    seen: list[int] = []

    class Counting(LocalStore):
        def commit_many(self, items):
            seen.append(len(items))
            return super().commit_many(items)

    x = np.arange(100, dtype="i4").reshape(10, 10)
    a = cs.create_array(Counting(tmp_path / "c.zarr"), shape=x.shape, chunks=(5, 5),
                        dtype="i4")
    seen.clear()
    a[...] = x
    assert sum(seen) == 4
    np.testing.assert_array_equal(a[...], x)


def test_quick_renames_of_many_directories_stay_on_the_calling_thread(tmp_path, monkeypatch):
    """A commit of tiny values in 20 directories renames them on this thread (handing
    quick renames to pool threads costs more than they do)."""
    threads: set[str] = set()
    real = local_commit._rename

    def recording(*args):
        threads.add(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(local_commit, "_rename", recording)
    store = LocalStore(tmp_path / "s")
    items = [(f"c/{i}/{j}", b"%d" % (i * 100 + j), None) for i in range(20) for j in range(30)]
    from chunkstore.storage.base import ANY
    assert store.commit_many([(k, v, ANY) for k, v, _ in items]) == [True] * len(items)
    assert threads == {threading.current_thread().name}
    assert all(store.get(k) == v for k, v, _ in items)
