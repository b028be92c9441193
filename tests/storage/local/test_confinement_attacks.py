"""Red team: symlinks swapped under an open store, hard links, a directory replaced by a
file, a symlinked root, and URLs that name local files. Nothing outside the root may be
read, written or listed."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import InvalidKeyError
from chunkstore.storage import LocalStore

SECRET = b"SECRET-OUTSIDE-" * 4


@pytest.fixture
def world(tmp_path):
    """``(root, group, arr, outside)``: a group with arrays ``arr`` (2-D) and ``b``, and an
    outside directory holding a secret chunk-like file and a group document."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "0").write_bytes(SECRET)
    (outside / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", '
                                       '"attributes": {"secret": 1}}')
    root = str(tmp_path / "g.zarr")
    g = cs.group(root)
    a = g.create_array("arr", shape=(8, 8), chunks=(4, 4), dtype="i4")
    a[:] = 1
    g.create_array("b", shape=(4,), chunks=(2,), dtype="i4")[:] = 2
    a[:2, :2]  # the store has walked c/0 once
    return root, g, a, outside


def _outside_untouched(outside):
    assert sorted(os.listdir(outside)) == ["0", "zarr.json"]
    assert (outside / "0").read_bytes() == SECRET


def _swap_dir(path, target):
    shutil.rmtree(path)
    os.symlink(target, path)


OPS = {
    "read": lambda a: a[:4, :4],
    "partial-write": lambda a: a.__setitem__((slice(0, 2), slice(0, 2)), 9),
    "whole-write": lambda a: a.__setitem__((slice(0, 4), slice(0, 4)), 9),
    "exists": lambda a: a.store.exists("arr/c/0/0"),
    "getsize": lambda a: a.store.getsize("arr/c/0/0"),
    "list_dir": lambda a: list(a.store.list_dir("arr/c/0")),
    "shrink": lambda a: a.resize(2, 2),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_chunk_directory_swapped_for_outside_symlink(world, op):
    root, _, a, outside = world
    _swap_dir(os.path.join(root, "arr", "c", "0"), outside)
    try:
        result = OPS[op](a)
    except InvalidKeyError as e:
        assert "arr/c/0" in str(e)
    else:
        assert result in (False, None, []) or (isinstance(result, np.ndarray)
                                               and SECRET not in result.tobytes())
    _outside_untouched(outside)


def test_listings_do_not_enter_an_outside_symlink(world):
    root, _, a, outside = world
    _swap_dir(os.path.join(root, "arr", "c", "0"), outside)
    keys = list(a.store.list_prefix("arr/"))
    assert not [k for k in keys if k.startswith("arr/c/0/")], keys
    assert a.nchunks_initialized == 2
    assert int(a.nbytes_stored) > 0
    _outside_untouched(outside)


def test_group_member_swapped_for_outside_symlink(world):
    root, _, _, outside = world
    _swap_dir(os.path.join(root, "b"), outside)
    g = cs.open_group(root)
    for call in (lambda: dict(g.members()), lambda: g["b"].attrs.asdict(),
                 lambda: dict(g.members(max_depth=None))):
        try:
            got = call()
        except InvalidKeyError:
            continue
        assert "secret" not in repr(got)
    _outside_untouched(outside)


def test_chunk_file_hard_linked_to_outside_file_is_replaced_not_written(world):
    """A hard link cannot be told from a file; a write must replace the link (rename),
    never write through it into the outside file."""
    root, _, a, outside = world
    target = os.path.join(root, "arr", "c", "0", "0")
    os.unlink(target)
    os.link(outside / "0", target)
    a[0:4, 0:4] = 7  # whole chunk
    a[0, 0] = 8  # partial (reads the chunk: garbage is refused or replaced)
    _outside_untouched(outside)
    assert a[0, 0] == 8


def test_directory_replaced_by_a_file(world):
    root, _, a, outside = world
    shutil.rmtree(os.path.join(root, "arr", "c", "0"))
    with open(os.path.join(root, "arr", "c", "0"), "wb") as f:
        f.write(b"not a directory")
    np.testing.assert_array_equal(a[:4, :4], np.zeros((4, 4)))  # missing chunks: fill
    with pytest.raises((cs.errors.ChunkstoreError, NotADirectoryError), match="c/0"):
        a[0:4, 0:4] = 3
    _outside_untouched(outside)


def test_symlinked_root(tmp_path, world):
    root, _, _, outside = world
    link = tmp_path / "link.zarr"
    os.symlink(root, link)
    a = cs.open_array(str(link), path="arr", mode="r+")
    a[0, 0] = 5
    assert cs.open_array(root, path="arr")[0, 0] == 5
    # a symlink inside the root pointing back out through the root's symlinked spelling
    os.symlink(str(link / ".." / "outside"), os.path.join(root, "arr", "c", "9"))
    with pytest.raises(InvalidKeyError):
        LocalStore(str(link)).get("arr/c/9/0")
    _outside_untouched(outside)


def test_symlink_swapped_between_operations_repeatedly(world):
    """Swap c/0 in and out many times between reads and writes of one open array."""
    root, _, a, outside = world
    inside = os.path.join(root, "arr", "c", "0")
    saved = inside + ".saved"
    for i in range(20):
        os.rename(inside, saved)
        os.symlink(outside, inside)
        with pytest.raises(InvalidKeyError):
            a[0:2, 0:2] = i
        os.unlink(inside)
        os.rename(saved, inside)
        a[0:2, 0:2] = i
        assert a[0, 0] == i
    _outside_untouched(outside)


@pytest.mark.parametrize("prefix", ["simplecache::file://", "filecache::file://"])
def test_chained_local_urls_are_confined(world, prefix):
    """``file://`` URLs resolve to a LocalStore (confined); the same files through a
    caching chain must be confined too.

    Observed (simplecache): members() lists 'b' and g["b"].attrs returns the outside
    group's {"secret": 1} (FsspecStore follows the symlink)."""
    root, _, _, outside = world
    _swap_dir(os.path.join(root, "b"), outside)
    try:
        g = cs.open_group(prefix + root, mode="r")
        got = g["b"].attrs.asdict()
    except (cs.errors.ChunkstoreError, KeyError):
        return
    assert "secret" not in got, f"{prefix}: read the outside document {got}"
