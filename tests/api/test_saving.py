"""save / load / copy, and the seeds' resize and append figures."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import chunkstore as cs


def test_save_load_one_array(tmp_path):
    data = np.arange(120, dtype="i2").reshape(10, 12)
    cs.save(str(tmp_path / "one.zarr"), data)
    out = cs.load(str(tmp_path / "one.zarr"))
    assert isinstance(out, np.ndarray) and out.dtype == data.dtype
    np.testing.assert_array_equal(out, data)


@pytest.mark.parametrize("fmt", [2, 3])
def test_save_load_several(tmp_path, fmt):
    a, b, c = np.arange(5), np.ones((2, 2), "f4"), np.array([True, False])
    path = str(tmp_path / f"many{fmt}.zarr")
    cs.save(path, a, b, zarr_format=fmt, extra=c)
    loaded = cs.load(path)
    assert sorted(loaded) == ["arr_0", "arr_1", "extra"] and len(loaded) == 3
    np.testing.assert_array_equal(loaded["arr_0"], a)
    np.testing.assert_array_equal(loaded["arr_1"], b)
    np.testing.assert_array_equal(loaded["extra"], c)
    assert cs.open_group(path, mode="r").zarr_format == fmt
    cs.save(path, a)  # replaces the group by an array
    np.testing.assert_array_equal(cs.load(path), a)
    with pytest.raises(KeyError):
        cs.load(str(tmp_path / "absent.zarr"))


def test_copy_between_chunkings_and_formats(tmp_path):
    src = cs.array(np.random.default_rng(0).normal(size=(50, 40)), chunks=(7, 9),
                   store=str(tmp_path / "s.zarr"), dimension_names=["y", "x"],
                   attributes={"units": "m"})
    dst = cs.copy(src, str(tmp_path / "d.zarr"), chunks=(25, 40), zarr_format=2)
    assert dst.chunks == (25, 40) and dst.zarr_format == 2 and dst.attrs["units"] == "m"
    np.testing.assert_array_equal(dst[:], src[:])
    same = cs.copy(src, str(tmp_path / "e.zarr"))
    assert same.chunks == (7, 9) and same.dimension_names == ("y", "x")
    with pytest.raises(cs.ContainsArrayError):
        cs.copy(src, str(tmp_path / "e.zarr"))
    cs.copy(src, str(tmp_path / "e.zarr"), overwrite=True, chunks=(50, 40))
    assert cs.open_array(str(tmp_path / "e.zarr"), mode="r").chunks == (50, 40)


def test_copy_group_tree(tmp_path):
    g = cs.group(str(tmp_path / "g.zarr"), attributes={"k": 1})
    g.create_dataset("a/b", data=np.arange(6).reshape(2, 3))
    g.create_group("empty")
    out = cs.copy(g, str(tmp_path / "h.zarr"))
    assert str(out.tree()) == str(g.tree()) and out.attrs["k"] == 1
    np.testing.assert_array_equal(out["a/b"][:], np.arange(6).reshape(2, 3))


def test_copy_from_memmap_with_bounded_memory(tmp_path):
    raw = tmp_path / "raw.bin"
    mm = np.lib.format.open_memmap(raw, mode="w+", dtype="f8", shape=(2048, 2048))  # 32 MiB
    mm[:] = np.arange(2048, dtype="f8")[:, None]
    mm.flush()
    src = np.load(raw, mmap_mode="r")
    tracemalloc.start()
    out = cs.copy(src, str(tmp_path / "m.zarr"), chunks=(128, 2048), max_bytes=2 << 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 12 << 20, f"copy held {peak / 2**20:.1f} MiB for a 32 MiB source"
    np.testing.assert_array_equal(out[::97, ::101], src[::97, ::101])


def test_copy_from_h5py_dataset(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "f.h5", "w") as f:
        d = f.create_dataset("d", data=np.arange(300, dtype="i4").reshape(30, 10), chunks=(8, 10))
        d.attrs["scale"] = np.float32(0.5)
        d.attrs["name"] = "counts"
        out = cs.copy(d, str(tmp_path / "h.zarr"))
        assert out.chunks == (8, 10) and out.attrs["scale"] == 0.5
        assert out.attrs["name"] == "counts"
        np.testing.assert_array_equal(out[:], d[:])


def test_seed_resize_figures():
    z = cs.zeros(shape=(10000, 10000), chunks=(1000, 1000))
    z[:] = 42
    z.resize(20000, 10000)
    assert z.shape == (20000, 10000)
    assert (z.nchunks_initialized, z.nchunks) == (100, 200)
    assert z[19999, 0] == 0 and z[9999, 9999] == 42


def test_seed_append_figures():
    a = np.arange(10000000, dtype="i4").reshape(10000, 1000)
    z = cs.array(a, chunks=(1000, 100))
    assert z.shape == (10000, 1000) and z.nchunks_initialized == 100
    assert z.append(a) == (20000, 1000)
    assert (z.nchunks_initialized, z.nchunks) == (200, 200)
    assert z.append(np.vstack([a, a]), axis=1) == (20000, 2000)
    assert (z.nchunks_initialized, z.nchunks) == (400, 400)
    np.testing.assert_array_equal(z[10000:, :1000], a)
    np.testing.assert_array_equal(z[:10000, 1000:], a)


def test_shrink_then_grow_reads_fill_not_stale():
    z = cs.full((10, 10), 5, chunks=(4, 4), dtype="i4")
    z[:] = np.arange(100).reshape(10, 10)
    z.resize(6, 6)
    z.resize(10, 10)
    expected = np.full((10, 10), 5, "i4")
    expected[:6, :6] = np.arange(100).reshape(10, 10)[:6, :6]
    np.testing.assert_array_equal(z[:], expected)


def test_assigning_an_array_copies_block_by_block(monkeypatch):
    z1 = cs.empty((3000, 1000), chunks=(100, 1000), dtype="i4")
    z1[:] = np.arange(3000, dtype="i4")[:, None]
    z2 = cs.empty_like(z1)
    import chunkstore.io.copy as copy_module
    monkeypatch.setattr(copy_module, "COPY_BLOCK_BYTES", 1 << 20)
    blocks = []
    write_region = z2.write_region

    def spy(region, data):
        blocks.append((region, data.nbytes))
        write_region(region, data)

    monkeypatch.setattr(z2, "write_region", spy)
    z2[:] = z1
    # 1 MiB blocks of whole chunk rows (200 rows of 4000 bytes), tiling the array
    assert [r for r, _ in blocks] == [(slice(s, s + 200), slice(0, 1000))
                                      for s in range(0, 3000, 200)]
    assert max(n for _, n in blocks) <= 1 << 20
    blocks.clear()
    z2[10:20, 5:7] = z1[0:10, 0:2]  # an ndarray: the plain path
    assert blocks == []
    expected = np.arange(3000, dtype="i4")[:, None].repeat(1000, 1)
    expected[10:20, 5:7] = expected[0:10, 0:2]
    np.testing.assert_array_equal(z2[:], expected)


def test_seed_compressor_spelling():
    from numcodecs import Blosc
    comp = Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE)
    z = cs.array(np.arange(10000, dtype="i4").reshape(100, 100), chunks=(10, 10),
                 compressor=comp)
    assert (z.compressor.cname, z.compressor.shuffle) == ("zstd", "bitshuffle")
    assert cs.array(np.arange(4), compressor=None).compressor is None
    with pytest.raises(TypeError, match="not both"):
        cs.zeros((4,), compressor=comp, compressors=[comp])


def test_copy_of_an_h5py_file_walks_its_groups(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.attrs["title"] = "t"
        f.create_group("grp").create_dataset("data", data=np.arange(12).reshape(3, 4))
        f.create_dataset("top", data=np.ones(5))
        out = cs.copy(f, str(tmp_path / "o.zarr"))
    assert dict(out.attrs) == {"title": "t"}
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "o.zarr"), path="grp/data")[:],
                                  np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(out["top"][:], np.ones(5))


def test_copy_of_something_else_is_a_clear_type_error(tmp_path):
    with pytest.raises(TypeError, match="cannot copy a object"):
        cs.copy(object(), str(tmp_path / "p.zarr"))
