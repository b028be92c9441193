"""chunkstore's own tests of the zarr-python 3.4 public API (issue 32): get_array /
get_group, ArrayConfig and read_missing_chunks, create / save_array mode=, *_like keeping
format and codecs, unsigned indexes, codec enums, the consolidated-metadata view and
zarr-python's error names. (zarr-python's own tests are ported in
tests/zarr_compat/test_zarr34_api.py.)"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import chunkstore as cs
from chunkstore import errors
from chunkstore.codecs import BloscCname, BloscCodec, BloscShuffle, BytesCodec, Endian
from chunkstore.config import ArrayConfig

try:
    import zarr
except ImportError:  # pragma: no cover - a test-only peer
    zarr = None
needs_zarr = pytest.mark.skipif(zarr is None, reason="zarr-python is not installed")


# -- get_array / get_group ------------------------------------------------------------------
def test_get_array_get_group_through_a_consolidated_snapshot():
    store = cs.MemoryStore()
    g = cs.group(store)
    g.create_group("a/b").create_array("x", shape=(3,), dtype="i2")[:] = [1, 2, 3]
    cs.consolidate_metadata(store)
    h = cs.open_consolidated(store, mode="r")
    assert_array_equal(h.get_array("a/b/x")[:], [1, 2, 3])
    assert h.get_group("a").get_group("b").get_array("x").shape == (3,)
    with pytest.raises(errors.ContainsArrayError):
        h.get_group("a/b/x")
    with pytest.raises(errors.ContainsGroupError):
        h.get_array("a/b")
    # the zarr-python names are the chunkstore ones, as before: a missing node is still
    # a KeyError and a FileNotFoundError for callers written against chunkstore
    with pytest.raises(KeyError):
        h.get_array("nope")
    with pytest.raises(FileNotFoundError):
        h.get_group("a/nope")


# -- ArrayConfig ------------------------------------------------------------------------------
def test_array_config_defaults_follow_the_global_config_when_the_handle_is_made():
    a = cs.zeros((4,), chunks=(2,), dtype="i4")
    assert a.config == ArrayConfig("C", False, read_missing_chunks=True)
    with cs.config.set({"array.read_missing_chunks": False, "array.write_empty_chunks": True}):
        b = cs.open_array(a.store)
    assert (b.config.read_missing_chunks, b.config.write_empty_chunks) == (False, True)
    assert a.config.read_missing_chunks is True  # an earlier handle keeps its settings
    assert cs.open_array(a.store).config.read_missing_chunks is True


def test_array_config_values_are_checked():
    with pytest.raises(ValueError, match="order"):
        ArrayConfig.from_dict({"order": "X"})
    with pytest.raises(ValueError, match="sharding_coalesce_max_bytes"):
        ArrayConfig.from_dict({"sharding_coalesce_max_bytes": -1})
    with pytest.raises(ValueError, match="Expected instance of bool"):
        cs.create_array(None, shape=(2,), config={"write_empty_chunks": 1})
    with pytest.raises(TypeError, match="config must be"):
        cs.create_array(None, shape=(2,), config="fast")
    with pytest.raises(ValueError, match="array.read_missing_chunks"):
        cs.config.set({"array.read_missing_chunks": "no"})
    assert ArrayConfig.from_dict({}).to_dict() == {
        "order": "C", "write_empty_chunks": False, "read_missing_chunks": True,
        "sharding_coalesce_max_gap_bytes": 2**20, "sharding_coalesce_max_bytes": 2**24}


def test_read_missing_chunks_false_survives_pickling_and_reaches_chunk_primitives():
    """A dask worker gets the handle by pickle: its reads must refuse missing chunks too."""
    a = cs.create_array(None, shape=(6,), chunks=(2,), dtype="u1", fill_value=9,
                        config={"read_missing_chunks": False})
    a[0:2] = [1, 2]
    b = pickle.loads(pickle.dumps(a))
    assert b.config == a.config
    assert_array_equal(b.read_chunk((0,)), [1, 2])
    for read in (lambda: b.read_chunk((1,)), lambda: b.read_region((slice(1, 3),)),
                 lambda: b.vindex[[0, 5]], lambda: b.oindex[[4]], lambda: b.blocks[2]):
        with pytest.raises(errors.ChunkNotFoundError, match="read_missing_chunks=False"):
            read()
    assert_array_equal(b.with_config({"read_missing_chunks": True})[:], [1, 2, 9, 9, 9, 9])


@pytest.mark.parametrize("kind", ["zip", "fsspec", "local"])
def test_read_missing_chunks_on_every_store_kind(kind, tmp_path):
    """The check asks each store for one byte of every chunk a read touches: a missing
    key must read as None on each backend (not as an error or an empty value)."""
    where = {"zip": str(tmp_path / "a.zip"), "local": str(tmp_path / "a.zarr"),
             "fsspec": f"memory://api32-{tmp_path.name}/a.zarr"}[kind]
    a = cs.create_array(where, shape=(4, 4), chunks=(2, 2), dtype="i8", fill_value=-1)
    a[2:, 2:] = 5
    a.store.close()
    b = cs.open_array(where, mode="r", config={"read_missing_chunks": False})
    assert_array_equal(b[2:, 2:], np.full((2, 2), 5))
    with pytest.raises(errors.ChunkNotFoundError, match=r"'c/0/0' \(and 2 more\)"):
        b[:]


def test_config_order_f_gives_fortran_ordered_reads():
    a = cs.array(np.arange(12).reshape(3, 4), chunks=(2, 2))
    f = cs.open_array(a.store, config={"order": "F"})
    out = f[:]
    assert out.flags.f_contiguous and not out.flags.c_contiguous
    assert_array_equal(out, np.arange(12).reshape(3, 4))
    assert a[:].flags.c_contiguous
    assert f.metadata == a.metadata  # a read setting: nothing stored changed


def test_write_empty_chunks_from_config_reaches_group_members():
    g = cs.group()
    g.create_array("x", shape=(4,), chunks=(2,), dtype="i4")
    with cs.config.set({"array.write_empty_chunks": True}):
        x = g["x"]
    x[:] = 0
    assert x.nchunks_initialized == 2  # stored although all fill


# -- create / save_array with mode= -----------------------------------------------------------
def test_create_mode_w_replaces_only_under_its_path():
    store = cs.MemoryStore()
    cs.create_array(store, name="a", shape=(2,), dtype="i1")[:] = 1
    cs.create_array(store, name="b", shape=(2,), dtype="i1")[:] = 2
    z = cs.create(shape=(3,), store=store, path="a", mode="w", dtype="i1", fill_value=7)
    assert_array_equal(z[:], [7, 7, 7])
    assert_array_equal(cs.open_array(store, path="b")[:], [2, 2])
    with pytest.raises(FileExistsError, match="mode 'w-'"):
        cs.create(shape=(3,), store=store, path="b", mode="w-")
    cs.create(shape=(3,), store=store, path="c", mode="w-")  # nothing under 'c'
    assert sorted(cs.open_group(store).keys()) == ["a", "b", "c"]


def test_save_array_replaces_without_mode_and_refuses_with_mode_a():
    store = cs.MemoryStore()
    cs.save_array(store, np.arange(3))
    cs.save_array(store, np.arange(5))  # chunkstore's documented default: replace
    assert_array_equal(cs.load(store), np.arange(5))
    with pytest.raises(errors.ContainsArrayError):
        cs.save_array(store, np.arange(2), mode="a")  # zarr-python's meaning of "a"
    assert_array_equal(cs.load(store), np.arange(5))


# -- *_like -----------------------------------------------------------------------------------
def test_like_keeps_shards_and_inner_codecs_of_a_sharded_source():
    src = cs.create_array(None, shape=(8, 8), dtype="i4", shards=(4, 4), chunks=(2, 2),
                          compressors={"name": "zstd", "configuration": {"level": 3}})
    z = cs.zeros_like(src)
    assert (z.shards, z.chunks) == (src.shards, src.chunks)
    assert z.metadata.codecs == src.metadata.codecs
    other = cs.zeros_like(src, chunks=(4, 4))  # the shards no longer fit: compressors only
    assert (other.shards, other.chunks) == (None, (4, 4))
    assert [c.to_json() for c in other.compressors] == [c.to_json() for c in src.compressors]
    f8 = cs.ones_like(src, dtype="f8")
    assert f8.dtype == np.float64 and f8.compressors[0].to_json()["name"] == "zstd"
    assert_array_equal(f8[:], np.ones((8, 8)))


def test_like_v2_keeps_filters_only_for_the_same_dtype():
    src = cs.create_array(None, shape=(6,), dtype="i4", zarr_format=2,
                          filters=[{"id": "delta", "dtype": "<i4"}],
                          compressors={"id": "zlib", "level": 2})
    same = cs.full_like(src, 3)
    assert same.metadata.filters == src.metadata.filters
    assert same.metadata.compressor == {"id": "zlib", "level": 2}
    other = cs.zeros_like(src, dtype="f4")
    assert other.metadata.filters is None or not other.metadata.filters
    assert other.metadata.compressor == {"id": "zlib", "level": 2}
    chosen = cs.zeros_like(src, compressors=None)  # a codec argument: none carried
    assert chosen.metadata.compressor is None and not chosen.metadata.filters


def test_group_like_uses_the_group_format():
    src = cs.create_array(None, shape=(4,), dtype="i4", compressors={"name": "zstd"})
    g2 = cs.group(zarr_format=2)
    m = g2.zeros_like("m", src)
    assert m.zarr_format == 2 and m.compressors != src.compressors
    g3 = cs.group()
    assert g3.empty_like("m", src).metadata.codecs == src.metadata.codecs


# -- unsigned indexes -------------------------------------------------------------------------
@pytest.mark.parametrize("index", [2**63, 2**64 - 1])
def test_unsigned_index_beyond_int64_never_wraps(index):
    data = np.arange(20).reshape(4, 5)
    a = cs.array(data, chunks=(2, 2))
    big = np.array([index], dtype="u8")
    for sel in (lambda: a[big, 1:3], lambda: a[big, [1]], lambda: a.oindex[big, :],
                lambda: a.get_coordinate_selection((big, np.array([0], "u8")))):
        with pytest.raises(errors.BoundsCheckError, match=f"index {index} is out of bounds"):
            sel()
    with pytest.raises(IndexError):
        a.vindex[big, np.array([0], "u8")] = 1
    assert_array_equal(a[:], data)


# -- codec enums -------------------------------------------------------------------------------
def test_codec_enums_store_plain_strings():
    by_enum = cs.create_array(None, shape=(6,), dtype=">i4", serializer=BytesCodec(
        endian=Endian.big), compressors=[BloscCodec(cname=BloscCname.zstd, clevel=3,
                                                   shuffle=BloscShuffle.bitshuffle)])
    by_str = cs.create_array(None, shape=(6,), dtype=">i4", serializer=BytesCodec(
        endian="big"), compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")])
    assert by_enum.store.get("zarr.json") == by_str.store.get("zarr.json")
    assert BloscShuffle.from_int(2) == "bitshuffle"
    with pytest.raises(ValueError):
        BloscShuffle.from_int(3)
    assert repr(BloscCname.lz4) == "'lz4'"


@needs_zarr
def test_codec_enum_names_match_zarr():
    import zarr.codecs as zc

    for ours in (BloscCname, BloscShuffle, Endian):
        theirs = getattr(zc, ours.__name__)
        names = getattr(theirs, "_members", None) or theirs.__members__
        assert sorted(ours.__members__) == sorted(names)


# -- consolidated metadata ---------------------------------------------------------------------
def _consolidated_tree() -> cs.MemoryStore:
    store = cs.MemoryStore()
    g = cs.group(store)
    g.create_group("a").create_array("x", shape=(3,), dtype="i1")
    g.create_array("y", shape=(2,), dtype="f4")
    cs.consolidate_metadata(store)
    return store


def test_consolidated_metadata_is_still_the_stored_dict():
    store = _consolidated_tree()
    cm = cs.open_consolidated(store).metadata.consolidated_metadata
    stored = json.loads(store.get("zarr.json"))["consolidated_metadata"]
    assert cm == stored and json.loads(json.dumps(cm)) == stored
    assert cm["metadata"]["a/x"]["shape"] == [3] and cm.to_dict() == stored


def test_consolidated_metadata_has_zarrs_attributes():
    store = _consolidated_tree()
    root = cs.open_consolidated(store)
    cm = root.metadata.consolidated_metadata
    assert (cm.kind, cm.must_understand) == ("inline", False)
    assert sorted(cm.metadata) == ["a", "y"] and cm.metadata["y"].shape == (2,)
    assert sorted(cm.flattened_metadata) == ["a", "a/x", "y"]
    assert cm.metadata["a"].consolidated_metadata.metadata["x"].shape == (3,)
    # a member group reached through the snapshot shows its part of it
    assert sorted(root["a"].metadata.consolidated_metadata.metadata) == ["x"]
    assert cs.group().metadata.consolidated_metadata is None


@needs_zarr
def test_consolidated_metadata_matches_zarrs_view():
    store = _consolidated_tree()
    ours = cs.open_consolidated(store).metadata.consolidated_metadata
    theirs = zarr.open_consolidated(zarr.storage.MemoryStore(
        {k: zarr.core.buffer.cpu.Buffer.from_bytes(store.get(k)) for k in store.list()}),
        mode="r").metadata.consolidated_metadata
    assert sorted(ours.metadata) == sorted(theirs.metadata)
    assert sorted(ours.flattened_metadata) == sorted(theirs.flattened_metadata)
    for name, node in theirs.flattened_metadata.items():
        mine = ours.flattened_metadata[name]
        assert getattr(mine, "shape", None) == getattr(node, "shape", None)


# -- zarr-python's error names ------------------------------------------------------------------
NAMES = ["ArrayNotFoundError", "GroupNotFoundError", "NodeNotFoundError", "ContainsArrayError",
         "ContainsGroupError", "ChunkNotFoundError", "BoundsCheckError", "BaseZarrError",
         "MetadataValidationError", "NodeTypeValidationError", "UnknownCodecError"]


@pytest.mark.parametrize("name", NAMES)
def test_error_names_have_zarrs_builtin_bases(name):
    ours = getattr(errors, name)
    bases = {"ArrayNotFoundError": (FileNotFoundError, KeyError, ValueError),
             "GroupNotFoundError": (FileNotFoundError, KeyError, ValueError),
             "NodeNotFoundError": (FileNotFoundError, KeyError, ValueError),
             "ContainsArrayError": (FileExistsError, ValueError),
             "ContainsGroupError": (FileExistsError, ValueError),
             "BoundsCheckError": (IndexError,)}.get(name, (ValueError,))
    assert all(issubclass(ours, b) for b in bases)
    if zarr is not None and hasattr(zarr.errors, name):
        theirs = getattr(zarr.errors, name)
        builtins = [b for b in theirs.__mro__ if b.__module__ == "builtins"]
        assert all(issubclass(ours, b) for b in builtins), (name, builtins)


def test_open_array_on_a_group_is_zarrs_node_type_error():
    g = cs.group()
    g.create_group("sub")
    with pytest.raises(errors.NodeTypeValidationError):
        cs.open_array(g.store, path="sub", mode="r")
    with pytest.raises(errors.ArrayNotFoundError):
        cs.open_array(g.store, path="nope", mode="r")
    with pytest.raises(errors.GroupNotFoundError):
        cs.open_group(g.store, path="nope", mode="r")
