"""Ported from zarr-python 3.4.2's tests (test_group.py, test_api.py, test_config.py,
test_array.py, test_indexing.py, test_store/test_zip.py): ``Group.get_array`` /
``get_group``, array ``config=`` and ``Array.config``, ``create`` / ``save_array`` with
``mode=``, the ``*_like`` functions, unsigned indexes and ``ZipStore`` over a file object.

Each test runs on chunkstore and, where the installed zarr-python has the feature, on
zarr-python itself (``zm`` is the module under test): the port asserts what zarr does.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import chunkstore as cs
from chunkstore.config import ArrayConfig

try:
    import zarr
    from packaging.version import Version

    ZARR = Version(zarr.__version__)
except ImportError:  # pragma: no cover - zarr is a test-only peer
    zarr, ZARR = None, None


def on_both(since: str):
    """Run on chunkstore, and on zarr-python >= ``since`` (skipped with the reason on an
    older one, e.g. 3.1.6 on Python 3.11)."""
    older = zarr is None or ZARR < Version(since)  # type: ignore[operator]
    why = (f"zarr-python {ZARR} has no such behaviour (added in {since})" if zarr is not None
           else "zarr-python is not installed")
    return pytest.mark.parametrize("zm", [
        pytest.param(cs, id="chunkstore"),
        pytest.param(zarr, id="zarr", marks=pytest.mark.skipif(older, reason=why))])


def array_config(zm, data):
    cls = ArrayConfig if zm is cs else zarr.core.array_spec.ArrayConfig
    return cls.from_dict(data)


def keys(store) -> list[str]:
    d = getattr(store, "_store_dict", None)
    return sorted(d) if d is not None else sorted(store.list())


def put(zm, store, key: str, value: bytes) -> None:
    if zm is cs:
        store.set(key, value)
    else:
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        sync(store.set(key, default_buffer_prototype().buffer.from_bytes(value)))


@pytest.fixture(params=["memory", "local"])
def kind(request):
    return request.param


def new_store(zm, kind, tmp_path):
    if kind == "memory":
        return zm.storage.MemoryStore()
    return zm.storage.LocalStore(str(tmp_path / "store.zarr"))


# -- Group.get_array / get_group (test_group.py) ----------------------------------------------
@on_both("3.3")
def test_group_get_array(zm, kind, tmp_path, zarr_format):
    group = zm.Group.from_store(new_store(zm, kind, tmp_path), zarr_format=zarr_format)
    subgroup = group.create_group(name="subgroup")
    subarray = group.create_array(name="subarray", shape=(10,), chunks=(10,), dtype="uint8")
    subsub = subgroup.create_array(name="subarray", shape=(10,), chunks=(10,), dtype="uint8")
    observed = group.get_array("subarray")
    assert isinstance(observed, zm.Array)
    assert observed == subarray
    assert group.get_array("subgroup/subarray") == subsub


@on_both("3.3")
def test_group_get_array_missing(zm, kind, tmp_path, zarr_format):
    group = zm.Group.from_store(new_store(zm, kind, tmp_path), zarr_format=zarr_format)
    with pytest.raises(zm.errors.ArrayNotFoundError, match="No array found in store"):
        group.get_array("missing")


@on_both("3.3")
def test_group_get_array_wrong_node_type(zm, kind, tmp_path, zarr_format):
    group = zm.Group.from_store(new_store(zm, kind, tmp_path), zarr_format=zarr_format)
    group.create_group(name="subgroup")
    with pytest.raises(zm.errors.ContainsGroupError, match="A group exists in store"):
        group.get_array("subgroup")


@on_both("3.3")
def test_group_get_group(zm, kind, tmp_path, zarr_format):
    group = zm.Group.from_store(new_store(zm, kind, tmp_path), zarr_format=zarr_format)
    subgroup = group.create_group(name="subgroup")
    subsub = subgroup.create_group(name="subsubgroup")
    observed = group.get_group("subgroup")
    assert isinstance(observed, zm.Group)
    assert observed == subgroup
    assert group.get_group("subgroup/subsubgroup") == subsub


@on_both("3.3")
def test_group_get_group_missing(zm, kind, tmp_path, zarr_format):
    group = zm.Group.from_store(new_store(zm, kind, tmp_path), zarr_format=zarr_format)
    with pytest.raises(zm.errors.GroupNotFoundError, match="No group found in store"):
        group.get_group("missing")


@on_both("3.3")
def test_group_get_group_wrong_node_type(zm, kind, tmp_path, zarr_format):
    group = zm.Group.from_store(new_store(zm, kind, tmp_path), zarr_format=zarr_format)
    group.create_array(name="subarray", shape=(10,), chunks=(10,), dtype="uint8")
    with pytest.raises(zm.errors.ContainsArrayError, match="An array exists in store"):
        group.get_group("subarray")


# -- config= and Array.config (test_api.py, test_group.py, test_array.py) --------------------
CONFIGS = [(None, {}), ({"read_missing_chunks": False}, {"read_missing_chunks": False}),
           ({"order": "F", "write_empty_chunks": True}, {"order": "F", "write_empty_chunks": True}),
           ("object", {"read_missing_chunks": False})]


@on_both("3.4.2")
@pytest.mark.parametrize("func", ["open_array", "open-shape", "open"])
@pytest.mark.parametrize("exists", [True, False])
@pytest.mark.parametrize(("config", "expected"), CONFIGS)
def test_open_array_config(zm, zarr_format, func, exists, config, expected):
    """open_array and open apply config= whether they open an existing array or create
    one; keys a partial config leaves out come from the global defaults."""
    if func == "open" and not exists:
        pytest.skip("without a shape, open can only open an existing array")
    store = zm.storage.MemoryStore()
    if exists:
        zm.create_array(store, shape=(4,), dtype="uint8", zarr_format=zarr_format)
    kwargs = {"shape": (4,), "dtype": "uint8", "zarr_format": zarr_format}
    if config is not None:
        kwargs["config"] = (array_config(zm, expected) if config == "object" else config)
    if func == "open_array":
        observed = zm.open_array(store, mode="a", **kwargs).config
    else:
        if func == "open":
            del kwargs["shape"], kwargs["dtype"]
        node = zm.open(store=store, mode="a", **kwargs)
        assert isinstance(node, zm.Array)
        observed = node.config
    assert observed == array_config(zm, expected)


@on_both("3.4.2")
@pytest.mark.parametrize("exists", [True, False])
def test_open_array_unknown_config_key(zm, exists):
    store = zm.storage.MemoryStore()
    if exists:
        zm.create_array(store, shape=(4,), dtype="uint8")
    with pytest.raises(TypeError, match=r"Unknown array config keys: \['nope'\]"):
        zm.open_array(store, mode="a", shape=(4,), dtype="uint8", config={"nope": 1})


@on_both("3.4.2")
@pytest.mark.parametrize("exists", [True, False])
def test_open_array_invalid_config_value(zm, exists):
    store = zm.storage.MemoryStore()
    if exists:
        zm.create_array(store, shape=(4,), dtype="uint8")
    with pytest.raises(ValueError, match="Expected instance of bool"):
        zm.open_array(store, mode="a", shape=(4,), dtype="uint8",
                      config={"read_missing_chunks": "yes"})


@on_both("3.4.2")
@pytest.mark.parametrize("exists", [True, False])
def test_open_group_with_config(zm, exists):
    store = zm.storage.MemoryStore()
    if exists:
        zm.create_group(store)
    with pytest.raises(TypeError, match="resolves to a group"):
        zm.open(store=store, mode="a", config={"order": "F"})
    assert keys(store) == (["zarr.json"] if exists else [])  # nothing created


@on_both("3.4.2")
@pytest.mark.parametrize("exists", [True, False])
@pytest.mark.parametrize(("config", "expected"), CONFIGS)
def test_require_array_config(zm, zarr_format, exists, config, expected):
    group = zm.Group.from_store(zm.storage.MemoryStore(), zarr_format=zarr_format)
    if exists:
        group.create_array("a", shape=(4,), dtype="uint8")
    if config == "object":
        config = array_config(zm, expected)
    observed = group.require_array("a", shape=(4,), dtype="uint8", config=config).config
    assert observed == array_config(zm, expected)


@on_both("3.4.2")
@pytest.mark.parametrize("exists", [True, False])
def test_require_array_bad_config(zm, exists):
    group = zm.Group.from_store(zm.storage.MemoryStore())
    if exists:
        group.create_array("a", shape=(4,), dtype="uint8")
    with pytest.raises(TypeError, match=r"Unknown array config keys: \['nope'\]"):
        group.require_array("a", shape=(4,), dtype="uint8", config={"nope": 1})
    with pytest.raises(ValueError, match="Expected instance of bool"):
        group.require_array("a", shape=(4,), dtype="uint8", config={"read_missing_chunks": "yes"})


@on_both("3.1")
@pytest.mark.parametrize("config", [{}, {"write_empty_chunks": True}, {"order": "C"}])
def test_with_config(zm, config):
    """with_config: a dict changes the keys it names, the others stay the source's."""
    source_config = {"write_empty_chunks": False, "order": "F"}
    source = zm.create_array({}, shape=(1,), dtype="uint8", config=source_config)
    new = source.with_config(config).config.to_dict()
    for key in source_config:
        assert new[key] == config.get(key, source_config[key])


@on_both("3.1")
def test_with_config_polymorphism(zm):
    source_config = array_config(zm, {"write_empty_chunks": False, "order": "F"})
    arr = zm.create_array({}, shape=(1,), dtype="uint8")
    assert (arr.with_config(source_config).config
            == arr.with_config(source_config.to_dict()).config)


@on_both("3.1")
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_array_respects_write_empty_chunks_config(zm, zarr_format):
    store = zm.storage.MemoryStore()
    zm.create(store=store, path="test_array", shape=(10,), chunks=(5,), dtype="f8",
              fill_value=0.0, zarr_format=zarr_format)
    arr = zm.open(store=store, path="test_array", config={"write_empty_chunks": True})
    assert arr.config.write_empty_chunks is True
    arr[0:5] = np.zeros(5)
    assert arr.nchunks_initialized == 1


@on_both("3.2")
@pytest.mark.parametrize("kwargs", [{"shards": (4, 4)}, {"compressors": None}],
                         ids=["partial_decode", "full_decode"])
def test_config_read_missing_chunks(zm, kind, tmp_path, kwargs):
    store = new_store(zm, kind, tmp_path)
    arr = zm.create_array(store=store, shape=(4, 4), chunks=(2, 2), dtype="int32",
                          fill_value=42, **kwargs)
    assert_array_equal(zm.open_array(store)[:], np.full((4, 4), 42, dtype="int32"))
    with zm.config.set({"array.read_missing_chunks": False}):
        with pytest.raises(zm.errors.ChunkNotFoundError):
            zm.open_array(store)[:]
    arr[:] = np.arange(16, dtype="int32").reshape(4, 4)
    with zm.config.set({"array.read_missing_chunks": False}):
        assert_array_equal(zm.open_array(store)[:], np.arange(16).reshape(4, 4))


@on_both("3.2")
def test_config_read_missing_chunks_sharded_inner(zm, kind, tmp_path):
    """Only a missing shard raises: missing inner chunks of a stored shard read as fill."""
    store = new_store(zm, kind, tmp_path)
    arr = zm.create_array(store=store, shape=(8, 4), chunks=(2, 2), shards=(4, 4),
                          dtype="int32", fill_value=42)
    arr[0:2, 0:2] = np.ones((2, 2), dtype="int32")
    with zm.config.set({"array.read_missing_chunks": False}):
        a = zm.open_array(store)
        expected = np.full((4, 4), 42, dtype="int32")
        expected[0:2, 0:2] = 1
        assert_array_equal(a[:4], expected)
        with pytest.raises(zm.errors.ChunkNotFoundError):
            a[4:]


@on_both("3.2")
def test_config_read_missing_chunks_write_empty_chunks(zm, kind, tmp_path):
    store = new_store(zm, kind, tmp_path)
    arr = zm.create_array(store=store, shape=(4,), chunks=(2,), dtype="int32", fill_value=0,
                          config={"write_empty_chunks": False, "read_missing_chunks": False})
    arr[:] = [1, 2, 3, 4]
    assert_array_equal(arr[:], [1, 2, 3, 4])
    arr[:] = 0  # all fill: the chunks are deleted
    with pytest.raises(zm.errors.ChunkNotFoundError):
        arr[:]
    with zm.config.set({"array.write_empty_chunks": True}):
        arr = zm.open_array(store)
        arr[:] = 0
        assert_array_equal(arr[:], [0, 0, 0, 0])


# -- create / save_array with mode= (test_api.py) ----------------------------------------------
def _write_existing_array(zm, store):
    old = zm.create_array(store, shape=(4,), chunks=(2,), dtype="int8")
    old[:] = [1, 2, 3, 4]
    put(zm, store, "junk", b"junk")


@on_both("3.1")
@pytest.mark.parametrize(("mode", "overwrite", "existing"), [
    (None, False, False), ("a", False, False), ("r+", False, False), ("w", False, False),
    ("w-", False, False), ("a", True, True), ("r+", True, True), ("w", False, True),
    ("w", True, True)])
@pytest.mark.parametrize("data", [None, np.arange(3, dtype="int8")], ids=["no-data", "data"])
def test_create_mode_data(zm, mode, overwrite, existing, data):
    """create opens the store with mode, replaces what is stored under the path when mode
    or overwrite says so, and writes data without taking its dtype."""
    store = zm.storage.MemoryStore()
    if existing:
        _write_existing_array(zm, store)
    reference = zm.storage.MemoryStore()
    zm.create(shape=(3,), chunks=(2,), store=reference, data=data)
    z = zm.create(shape=(3,), chunks=(2,), store=store, mode=mode, overwrite=overwrite,
                  data=data)
    assert keys(store) == keys(reference)
    assert z.dtype == np.dtype("float64")
    assert_array_equal(z[:], np.zeros(3) if data is None else data)


@on_both("3.1")
@pytest.mark.parametrize("mode", [None, "a", "r+"])
def test_create_existing_array_without_overwrite(zm, mode):
    store = zm.storage.MemoryStore()
    _write_existing_array(zm, store)
    with pytest.raises(zm.errors.ContainsArrayError):
        zm.create(shape=(3,), store=store, mode=mode)


@on_both("3.1")
@pytest.mark.parametrize("overwrite", [False, True])
def test_create_mode_w_minus_existing_data(zm, overwrite):
    store = zm.storage.MemoryStore()
    _write_existing_array(zm, store)
    before = keys(store)
    with pytest.raises(FileExistsError, match="mode 'w-'"):
        zm.create(shape=(3,), store=store, mode="w-", overwrite=overwrite)
    assert keys(store) == before


@on_both("3.1")
def test_create_mode_r(zm):
    with pytest.raises(ValueError, match="read-only"):
        zm.create(shape=(3,), store=zm.storage.MemoryStore(), mode="r")


@on_both("3.4")
def test_create_invalid_mode(zm):
    with pytest.raises(ValueError, match="Invalid mode: x"):
        zm.create(shape=(3,), store=zm.storage.MemoryStore(), mode="x")


@on_both("3.4")
def test_create_unknown_keyword_keeps_existing(zm):
    store = zm.storage.MemoryStore()
    _write_existing_array(zm, store)
    before = keys(store)
    with pytest.raises(TypeError, match="unexpected keyword argument 'typo'"):
        zm.create(shape=(3,), store=store, mode="w", typo=1)
    assert keys(store) == before


OVERWRITE_CALLS = {
    "create-mode": lambda zm, store, **kw: zm.create(store=store, mode="w", shape=(2,), **kw),
    "save_array": lambda zm, store, **kw: zm.save_array(store, np.arange(2), mode="w", **kw),
}


@on_both("3.1")
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("call", OVERWRITE_CALLS)
def test_overwrite_replaces_existing_node(zm, zarr_format, call):
    """mode="w" replaces the node at the path, chunks included: the store ends as the
    same call leaves an empty store."""
    store = zm.storage.MemoryStore()
    zm.create_array(store, shape=(4,), dtype="int32", zarr_format=zarr_format)[:] = 1
    OVERWRITE_CALLS[call](zm, store)
    reference = zm.storage.MemoryStore()
    OVERWRITE_CALLS[call](zm, reference)
    assert keys(store) == keys(reference)
    assert_array_equal(zm.open_array(store)[:], zm.open_array(reference)[:])


@on_both("3.1")
@pytest.mark.parametrize("call", OVERWRITE_CALLS)
def test_overwrite_read_only_store_names_mode(zm, call):
    with pytest.raises(ValueError, match="mode is 'w'"):
        OVERWRITE_CALLS[call](zm, zm.storage.MemoryStore(read_only=True))


@on_both("3.1")
@pytest.mark.parametrize("mode", ["a", "r+"])
def test_save_array_mode_refuses_existing(zm, mode):
    store = zm.storage.MemoryStore()
    zm.save_array(store, np.arange(3), mode="w")
    with pytest.raises(zm.errors.ContainsArrayError):
        zm.save_array(store, np.arange(4), mode=mode)
    zm.save_array(store, np.arange(4), mode=mode, overwrite=True)
    assert_array_equal(zm.open_array(store)[:], np.arange(4))
    with pytest.raises(FileExistsError, match="mode 'w-'"):
        zm.save_array(store, np.arange(5), mode="w-")
    assert_array_equal(zm.open_array(store)[:], np.arange(4))


# -- the *_like functions (test_api.py) -----------------------------------------------------
LIKE = ["zeros_like", "ones_like", "empty_like", "full_like", "open_like"]


@on_both("3.1")
@pytest.mark.parametrize("func", LIKE)
@pytest.mark.parametrize(("out_shape", "out_chunks", "out_dtype", "out_fill"), [
    ("keep", "keep", "keep", "keep"), ((10, 10), (10, 10), "int8", 4),
    ((10, 10), "keep", "keep", 4), ("keep", (10, 10), "int8", "keep")])
def test_array_like_creation(zm, zarr_format, func, out_shape, out_chunks, out_dtype,
                             out_fill):
    ref_fill = 100
    ref = zm.create_array({}, shape=(11, 12), dtype="uint8", chunks=(11, 12),
                          zarr_format=zarr_format, fill_value=ref_fill)
    kwargs: dict = {}
    if func in ("full_like", "empty_like", "open_like"):
        expect_fill = ref_fill if out_fill == "keep" else out_fill
        if out_fill != "keep":
            kwargs["fill_value"] = out_fill
    else:
        expect_fill = 0 if func == "zeros_like" else 1
    if func == "open_like":
        kwargs["mode"] = "w"
        kwargs["store"] = zm.storage.MemoryStore()
    if out_shape != "keep":
        kwargs["shape"] = out_shape
    if out_chunks != "keep":
        kwargs["chunks"] = out_chunks
    if out_dtype != "keep":
        kwargs["dtype"] = out_dtype
    new = getattr(zm, func)(ref, path="foo", zarr_format=zarr_format, **kwargs)
    assert new.shape == (ref.shape if out_shape == "keep" else out_shape)
    assert new.chunks == (ref.chunks if out_chunks == "keep" else out_chunks)
    assert new.dtype == (ref.dtype if out_dtype == "keep" else np.dtype(out_dtype))
    assert np.all(new[:] == expect_fill)


@on_both("3.4.1")
@pytest.mark.parametrize("mode_kwargs", [{}, {"mode": None}])
def test_open_like_creates_array_by_default(zm, zarr_format, mode_kwargs):
    ref = zm.create_array({}, shape=(11, 12), dtype="uint8", chunks=(11, 12),
                          zarr_format=zarr_format, fill_value=100)
    new = zm.open_like(ref, path="foo", store={}, zarr_format=zarr_format, **mode_kwargs)
    assert (new.shape, new.chunks, new.dtype) == (ref.shape, ref.chunks, ref.dtype)
    assert np.all(new[:] == 100)


@on_both("3.4.1")
def test_open_like_default_mode_rejects_read_only_store(zm, zarr_format):
    ref = zm.create_array({}, shape=(11, 12), dtype="uint8", zarr_format=zarr_format)
    with pytest.raises(ValueError, match="read-only"):
        zm.open_like(ref, path="foo", store=zm.storage.MemoryStore(read_only=True),
                     zarr_format=zarr_format)


@on_both("3.4.1")
@pytest.mark.parametrize("func", ["empty_like", "zeros_like", "ones_like", "full_like"])
@pytest.mark.parametrize("source_format", [2, 3])
@pytest.mark.parametrize("zarr_format", [None, 2, 3])
def test_like_zarr_format(zm, func, source_format, zarr_format):
    """A new array like a zarr array has its format unless another is requested, and its
    codecs only when the formats match."""
    source = zm.create_array({}, shape=(4,), dtype="int32", compressors=None,
                             zarr_format=source_format, fill_value=7)
    new = getattr(zm, func)(source, zarr_format=zarr_format)
    expected = source_format if zarr_format is None else zarr_format
    assert new.metadata.zarr_format == expected
    assert (new.shape, new.dtype) == (source.shape, source.dtype)
    if expected == source_format:
        assert new.compressors == source.compressors
    else:
        assert new.compressors == zm.create_array({}, shape=(4,), dtype="int32",
                                                  zarr_format=expected).compressors


@on_both("3.4.1")
@pytest.mark.parametrize("source_format", [2, 3])
@pytest.mark.parametrize("target_format", [None, 2, 3])
def test_open_like_zarr_format(zm, source_format, target_format):
    """open_like opens an existing array of either format and creates a missing one in the
    default format: the source's format is not inherited."""
    source = zm.zeros(store={}, shape=(4,), dtype="int32", zarr_format=source_format)
    store = zm.storage.MemoryStore()
    if target_format is not None:
        zm.create_array(store, name="existing", shape=(4,), dtype="int32",
                        zarr_format=target_format)
    opened = zm.open_like(source, path="existing", store=store)
    assert opened.metadata.zarr_format == (target_format or 3)
    assert set(keys(store)) & {"existing/zarr.json", "existing/.zarray"} == {
        "existing/zarr.json" if opened.metadata.zarr_format == 3 else "existing/.zarray"}


# -- unsigned indexes (test_indexing.py) ------------------------------------------------------
@on_both("3.1")
@pytest.mark.parametrize("indexer", ["oindex", "vindex"])
@pytest.mark.parametrize("operation", ["read", "write"])
@pytest.mark.parametrize("index", [4, 2**63, 2**64 - 4, 2**64 - 1])
def test_unsigned_index_out_of_bounds(zm, zarr_format, indexer, operation, index):
    """Unsigned indexes are checked before narrowing can turn them negative."""
    data = np.arange(16).reshape(4, 4)
    arr = zm.create_array({}, data=data, chunks=(2, 2), zarr_format=zarr_format)
    selection = (np.array([0, 1]), np.array([0, index], dtype="uint64"))
    accessor = getattr(arr, indexer)
    with pytest.raises(IndexError, match="out of bounds"):
        if operation == "read":
            accessor[selection]
        else:
            accessor[selection] = 99
    assert_array_equal(arr[:], data)


@on_both("3.4")
@pytest.mark.parametrize("indexer", ["oindex", "vindex"])
@pytest.mark.parametrize("dtype", ["uint8", "uint64"])
@pytest.mark.parametrize("indices", [[], [3, 0], [0, 3], [0] * 16 + [3] * 16])
def test_unsigned_index_roundtrip(zm, zarr_format, indexer, dtype, indices):
    expected = np.arange(4)
    arr = zm.create_array({}, data=expected, chunks=(2,), zarr_format=zarr_format)
    selection = np.array(indices, dtype=dtype)
    accessor = getattr(arr, indexer)
    assert_array_equal(accessor[selection], expected[selection])
    accessor[selection] = 99
    expected[selection] = 99
    assert_array_equal(arr[:], expected)


@on_both("3.4")
@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_unsorted_index_unsigned_dtype(zm, dtype):
    a = np.arange(8).reshape(4, 2)
    z = zm.create_array({}, data=a, chunks=(2, 1))
    rows = np.array([3, 0], dtype=dtype)
    assert_array_equal(a[[3, 0], :], z[rows, :])
    assert_array_equal(a[[3, 0], [1, 0]], z.vindex[rows, np.array([1, 0], dtype=dtype)])


# -- ZipStore over an open binary file object (test_store/test_zip.py) -------------------------
@pytest.fixture
def zip_bytes(tmp_path) -> bytes:
    path = tmp_path / "data.zip"
    store = cs.ZipStore(str(path), mode="w")
    cs.create_array(store, data=np.arange(10), chunks=(5,))
    store.close()
    return path.read_bytes()


@on_both("3.3")
def test_zip_read_from_fileobj(zm, zip_bytes):
    store = zm.storage.ZipStore(io.BytesIO(zip_bytes), mode="r")
    assert_array_equal(zm.open_array(store, mode="r")[...], np.arange(10))
    assert store.path is None


@on_both("3.3")
def test_zip_write_to_fileobj(zm):
    buffer = io.BytesIO()
    store = zm.storage.ZipStore(buffer, mode="w", read_only=False)
    zm.create_array(store, data=np.arange(4))
    store.close()
    roundtrip = zm.storage.ZipStore(io.BytesIO(buffer.getvalue()), mode="r")
    assert_array_equal(zm.open_array(roundtrip, mode="r")[...], np.arange(4))


@on_both("3.4.2")
def test_zip_write_after_close_keeps_entries(zm):
    buffer = io.BytesIO()
    store = zm.storage.ZipStore(buffer, mode="w", read_only=False)
    put(zm, store, "foo", b"1")
    store.close()
    put(zm, store, "bar", b"2")
    store.close()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as zf:
        assert sorted(zf.namelist()) == ["bar", "foo"]
        assert zf.read("foo") == b"1" and zf.read("bar") == b"2"


@on_both("3.4.2")
def test_zip_write_only_reuse_after_close_raises(zm, tmp_path):
    path = tmp_path / "data.zip"
    with path.open("wb") as f:
        store = zm.storage.ZipStore(f, mode="w", read_only=False)
        put(zm, store, "foo", b"1")
        store.close()
        try:
            with pytest.raises(io.UnsupportedOperation, match="readable and seekable"):
                put(zm, store, "bar", b"2")
        finally:
            store.close()
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["foo"]


@on_both("3.3")
def test_zip_invalid_file_object_rejected(zm):
    with pytest.raises(TypeError, match="read/seek/tell"):
        zm.storage.ZipStore(42, mode="r")


@on_both("3.3")
def test_zip_fsspec_file(zm, tmp_path, zip_bytes):
    fsspec = pytest.importorskip("fsspec")
    path = tmp_path / "fsspec.zip"
    path.write_bytes(zip_bytes)
    with fsspec.open(f"local://{path}", "rb") as fileobj:
        store = zm.storage.ZipStore(fileobj, mode="r")
        assert_array_equal(zm.open_array(store, mode="r")[...], np.arange(10))


@on_both("3.3")
def test_zip_pickle_fileobj_raises(zm, zip_bytes):
    import pickle

    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(zm.storage.ZipStore(io.BytesIO(zip_bytes), mode="r"))


@on_both("3.3")
def test_zip_eq_same_file_object(zm, zip_bytes):
    fileobj = io.BytesIO(zip_bytes)
    store = zm.storage.ZipStore(fileobj, mode="r")
    assert store == zm.storage.ZipStore(fileobj, mode="r")
    assert store != zm.storage.ZipStore(io.BytesIO(zip_bytes), mode="r")
