"""Data types beyond numbers: fixed-length bytes/unicode, variable-length strings and bytes,
datetime64/timedelta64 — against NumPy, zarr-python 3 (v3 and v2, both directions, metadata
field by field and chunk bytes) and tensorstore where it supports the type."""

from __future__ import annotations

import json
import warnings

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import CodecError, MetadataError, UnsupportedError

zarr = pytest.importorskip("zarr")

STR = np.dtypes.StringDType()


def _strings(n: int) -> np.ndarray:
    words = ["", "a", "héllo", "日本語", "x" * 17, "tab\tnul\x00?"]
    return np.array([words[i % len(words)] + str(i % 3) * (i % 2) for i in range(n)], dtype=STR)


def _data(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    rng = np.random.default_rng(n)
    if kind == "S5":
        out = np.array([bytes(rng.integers(97, 123, i % 6, dtype=np.uint8)) for i in range(n)],
                       dtype="S5")
    elif kind == "U5":
        out = np.array(["", "ab", "héllo", "日本", "z"] * (n // 5 + 1), dtype="U5")[:n]
    elif kind == "str":
        out = _strings(n)
    elif kind == "bytes":
        out = np.empty(n, dtype=object)
        out[:] = [bytes(rng.integers(0, 256, i % 7, dtype=np.uint8)) for i in range(n)]
    else:
        out = rng.integers(-10**9, 10**9, n).astype(kind)
        out[::7] = np.array("NaT", dtype=kind)
    return out.reshape(shape)


# (chunkstore dtype, zarr-python dtype, non-default fill, zarr's JSON for that fill)
CASES = {
    "S5": ("S5", "S5", b"ab", "YWI="),
    "U5": ("U5", "U5", "hé", "hé"),
    "str": (str, str, "x", "x"),
    "bytes": (bytes, "vlen-bytes", b"ab", "YWI="),
    "M8[ns]": ("M8[ns]", "M8[ns]", np.datetime64("2020-01-01", "ns"), 1577836800000000000),
    "M8[D]": ("M8[D]", "M8[D]", np.datetime64("1970-01-02"), 1),
    "m8[s]": ("m8[s]", "m8[s]", np.timedelta64(5, "s"), 5),
    "M8[10s]": ("M8[10s]", "M8[10s]", None, None),
}
KINDS = list(CASES)


def _zdtype(kind: str):
    z = CASES[kind][1]
    return zarr.dtype.VariableLengthBytes() if z == "vlen-bytes" else z


def _equal(a: np.ndarray, b: np.ndarray) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    if a.dtype.kind in "Mm":
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view("i8"), b.view("i8"))
    else:
        assert a.tolist() == b.tolist()


def _stores(tmp_path):
    return {"memory": cs.MemoryStore(), "local": cs.LocalStore(str(tmp_path / "s.zarr"))}


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", ["memory", "local"])
def test_round_trip_vs_numpy(tmp_path, kind, fmt, where):
    store = _stores(tmp_path)[where]
    data = _data(kind, (7, 5))
    a = cs.create_array(store, "x", shape=data.shape, chunks=(3, 2), dtype=CASES[kind][0],
                        zarr_format=fmt)
    expected = np.full(data.shape, a.fill_value, dtype=data.dtype)
    _equal(a[...], expected)  # nothing stored yet: all fill
    a[1:6, 1:] = data[1:6, 1:]
    expected[1:6, 1:] = data[1:6, 1:]
    a[0, ::2] = data[0, ::2]
    expected[0, ::2] = data[0, ::2]
    b = cs.open_array(store, mode="r", path="x")
    _equal(b[...], expected)
    _equal(b[2:5, 3], expected[2:5, 3])
    _equal(b.oindex[[0, 4], [1, 3]], expected[np.ix_([0, 4], [1, 3])])
    assert b.dtype == a.dtype
    if kind == "str":
        assert b.dtype == STR
    elif kind == "bytes":
        assert b.dtype == np.dtype("O")
    else:
        assert b.dtype == np.dtype(kind)


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_metadata_and_chunks_match_zarr_python(tmp_path, kind, fmt):
    """Same arguments -> the same documents field by field and the same chunk bytes."""
    fill = CASES[kind][2]
    data = _data(kind, (5,))
    kw = {} if fill is None else {"fill_value": fill}
    zp = str(tmp_path / "z.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(zp, shape=(5,), chunks=(2,), dtype=_zdtype(kind), zarr_format=fmt,
                              compressors=None, **kw)
        z[:] = data
    ours = cs.LocalStore(str(tmp_path / "c.zarr"))
    a = cs.create_array(ours, shape=(5,), chunks=(2,), dtype=CASES[kind][0], zarr_format=fmt,
                        compressors=None, **kw)
    a[:] = data
    doc = ".zarray" if fmt == 2 else "zarr.json"
    theirs_doc = json.loads((tmp_path / "z.zarr" / doc).read_text())
    ours_doc = json.loads((tmp_path / "c.zarr" / doc).read_text())
    if fmt == 3 and theirs_doc.get("storage_transformers") == []:
        del theirs_doc["storage_transformers"]  # an empty default we do not write
    assert set(ours_doc) == set(theirs_doc)
    for field in theirs_doc:
        assert ours_doc[field] == theirs_doc[field], field
    if fill is not None:
        assert ours_doc["fill_value"] == CASES[kind][3]
    theirs_keys = sorted(p.name for p in (tmp_path / "z.zarr").rglob("*") if p.is_file())
    ours_keys = sorted(p.name for p in (tmp_path / "c.zarr").rglob("*") if p.is_file())
    assert [k for k in ours_keys if k != ".zattrs"] == [k for k in theirs_keys if k != ".zattrs"]
    for p in (tmp_path / "z.zarr").rglob("*"):
        if p.is_file() and p.name not in (".zarray", ".zattrs", "zarr.json"):
            rel = p.relative_to(tmp_path / "z.zarr")
            assert (tmp_path / "c.zarr" / rel).read_bytes() == p.read_bytes(), str(rel)


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_zarr_python_reads_ours(tmp_path, kind, fmt):
    data = _data(kind, (6, 4))
    path = str(tmp_path / "c.zarr")
    fill = CASES[kind][2]
    kw = {} if fill is None else {"fill_value": fill}
    a = cs.create_array(path, shape=(6, 4), chunks=(4, 3), dtype=CASES[kind][0],
                        zarr_format=fmt, **kw)  # default ("auto") compressor
    a[:5] = data[:5]
    expected = np.full(data.shape, a.fill_value, dtype=data.dtype)
    expected[:5] = data[:5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_array(path, mode="r")
        got = z[...]
    _equal(got, expected)
    if fill is not None:
        _equal(np.asarray([z.fill_value], dtype=data.dtype), np.asarray([fill], dtype=data.dtype))


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_we_read_zarr_python(tmp_path, kind, fmt):
    data = _data(kind, (6, 4))
    path = str(tmp_path / "z.zarr")
    fill = CASES[kind][2]
    kw = {} if fill is None else {"fill_value": fill}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(path, shape=(6, 4), chunks=(4, 3), dtype=_zdtype(kind),
                              zarr_format=fmt, **kw)  # zarr-python's default codecs (zstd)
        z[:5] = data[:5]
        z_fill = z.fill_value
    expected = np.full(data.shape, z_fill, dtype=data.dtype)
    expected[:5] = data[:5]
    a = cs.open_array(path, mode="r")
    _equal(a[...], expected)
    _equal(np.asarray([a.fill_value], dtype=data.dtype), np.asarray([z_fill], dtype=data.dtype))
    # and writing back through chunkstore is read by zarr-python again
    b = cs.open_array(path, mode="r+")
    b[5] = data[5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _equal(zarr.open_array(path, mode="r")[...], data)


def test_default_fill_values_are_zarr_pythons():
    for fmt in (2, 3):
        assert np.isnat(cs.create_array(None, shape=(2,), dtype="M8[ns]",
                                        zarr_format=fmt).fill_value)
        assert np.isnat(cs.create_array(None, shape=(2,), dtype="m8[s]",
                                        zarr_format=fmt).fill_value)
        assert cs.create_array(None, shape=(2,), dtype=str, zarr_format=fmt).fill_value == ""
        assert cs.create_array(None, shape=(2,), dtype=bytes, zarr_format=fmt).fill_value == b""
        assert cs.create_array(None, shape=(2,), dtype="S3", zarr_format=fmt).fill_value == b""
    z = cs.zeros((3,), dtype="M8[s]")
    _equal(z[:], np.zeros(3, dtype="M8[s]"))


@pytest.mark.parametrize("fmt", [3, 2])
def test_all_fill_chunks_are_not_stored(fmt):
    store = cs.MemoryStore()
    t = cs.create_array(store, "t", shape=(8,), chunks=(4,), dtype="M8[ns]", zarr_format=fmt)
    t[:] = np.datetime64("2001-01-01", "ns")
    assert len([k for k in store.list_prefix("t/") if "zarr" not in k and ".z" not in k]) == 2
    t[:4] = np.datetime64("NaT")  # back to the (NaT) fill: the chunk is deleted
    chunk_keys = [k for k in store.list_prefix("t/") if "zarr" not in k and ".z" not in k]
    assert len(chunk_keys) == 1
    s = cs.create_array(store, "s", shape=(8,), chunks=(4,), dtype=str, zarr_format=fmt,
                        fill_value="-")
    s[:] = "-"
    assert [k for k in store.list_prefix("s/") if "zarr" not in k and ".z" not in k] == []
    s[5] = "é"
    assert s[4:7].tolist() == ["-", "é", "-"]


def test_fill_value_json_round_trip_and_checks():
    from chunkstore.metadata.dtypes import fill_value_to_json, parse_fill_value
    cases = [("S4", b"a\x00b", "YQBi"), ("U2", "hé", "hé"), (STR, "x y", "x y"),
             (np.dtype("O"), b"\xff", "/w=="), ("M8[ms]", np.datetime64("NaT"), -2**63),
             ("m8[us]", np.timedelta64(-3, "us"), -3)]
    for dt, value, js in cases:
        dt = np.dtype(dt)
        v = np.array(value, dtype=dt)[()] if dt.kind not in "OT" else value
        assert fill_value_to_json(v, dt) == js
        back = parse_fill_value(js, dt, "t")
        if dt.kind in "Mm":
            assert np.array(back).view("i8") == np.array(v).view("i8")
        else:
            assert back == v
    assert np.isnat(parse_fill_value("NaT", np.dtype("M8[s]"), "t"))
    for bad, dt in [("@@@", "S4"), (7, "U3"), ("abcde", "U2"), ("YWJjZGVm", "S3"), (1.5, "M8[s]"),
                    (2**63, "m8[s]"), (True, STR), ([1], STR)]:
        with pytest.raises(MetadataError, match="fill_value"):
            parse_fill_value(bad, np.dtype(dt), "t")


def test_bad_data_types_are_refused_with_the_field():
    store = cs.MemoryStore()
    cs.create_array(store, shape=(2,), dtype="S2")
    doc = json.loads(bytes(store.get("zarr.json")))
    for data_type in ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}},
                      {"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}},
                      {"name": "numpy.datetime64", "configuration": {"unit": "fortnight",
                                                                      "scale_factor": 1}},
                      {"name": "numpy.datetime64", "configuration": {"unit": "s"}},
                      {"name": "numpy.timedelta64", "configuration": {"unit": "generic",
                                                                       "scale_factor": 2}},
                      {"name": "raw_bytes", "configuration": {"length_bytes": 0}}):
        store.set("zarr.json", json.dumps({**doc, "data_type": data_type}).encode())
        with pytest.raises(MetadataError, match="data_type"):
            cs.open_array(store, mode="r")
    for dt in ("S0", "U0", "V0"):
        with pytest.raises(UnsupportedError):
            cs.create_array(None, shape=(2,), dtype=dt)


@pytest.mark.parametrize("fill", [0, None, ""])
def test_legacy_v2_string_fill_values_read_like_zarr_python(tmp_path, fill):
    doc = {"zarr_format": 2, "shape": [3], "chunks": [2], "dtype": "|O", "fill_value": fill,
           "order": "C", "filters": [{"id": "vlen-utf8"}], "compressor": None}
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / ".zarray").write_text(json.dumps(doc))
    (tmp_path / "l" / "0").write_bytes(bytes(numcodecs.VLenUTF8().encode(
        np.array(["a", "b"], dtype=object))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = zarr.open_array(str(tmp_path / "l"), mode="r")[:]
    ours = cs.open_array(str(tmp_path / "l"), mode="r")[:]
    assert ours.tolist() == theirs.tolist() == ["a", "b", "0" if fill == 0 else ""]


def test_v2_object_array_without_object_codec_is_refused():
    store = cs.MemoryStore()
    cs.create_array(store, shape=(2,), dtype=str, zarr_format=2)
    doc = json.loads(bytes(store.get(".zarray")))
    store.set(".zarray", json.dumps({**doc, "filters": None}).encode())
    with pytest.raises(MetadataError, match="object codec"):
        cs.open_array(store, mode="r")


def _pickled_v2(store) -> list:
    items = [{"a": 1}, (2, 3), None, "s"]
    obj = np.empty(4, dtype=object)
    obj[:] = items
    doc = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|O", "fill_value": None,
           "order": "C", "filters": [{"id": "pickle", "protocol": 5}], "compressor": None}
    store.set(".zarray", json.dumps(doc).encode())
    store.set("0", bytes(numcodecs.Pickle().encode(obj)))
    return items


def test_object_codecs_refused_unless_opted_in(monkeypatch):
    store = cs.MemoryStore()
    items = _pickled_v2(store)
    # numcodecs >= 0.16.6 has its own global pickle gate; even with it open, we refuse
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True, raising=False)
    with pytest.raises(CodecError, match="allow_unsafe_codecs=True"):
        cs.open_array(store, mode="r")[...]
    a = cs.open_array(store, mode="r", allow_unsafe_codecs=True)
    assert a[...].tolist() == items
    # json2 (no numcodecs gate of its own): refused, then readable once opted in
    js = cs.MemoryStore()
    obj = np.array([{"a": [1, 2]}, "s", 3], dtype=object)
    doc = {"zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "|O", "fill_value": None,
           "order": "C", "filters": [numcodecs.JSON().get_config()], "compressor": None}
    js.set(".zarray", json.dumps(doc).encode())
    js.set("0", bytes(numcodecs.JSON().encode(obj)))
    with pytest.raises(CodecError, match="'json2'.*allow_unsafe_codecs=True"):
        cs.open_array(js, mode="r")[...]
    assert cs.open_array(js, mode="r", allow_unsafe_codecs=True)[...].tolist() == obj.tolist()
    for codec in (numcodecs.Pickle(), numcodecs.MsgPack(), numcodecs.JSON()):
        with pytest.raises(CodecError, match="allow_unsafe_codecs"):
            cs.create_array(None, shape=(3,), dtype=object, zarr_format=2, filters=[codec])
    b = cs.create_array(None, shape=(3,), dtype=object, zarr_format=2,
                        filters=[numcodecs.Pickle()], allow_unsafe_codecs=True)
    b[:2] = np.array([{"k": [1]}, 3.5], dtype=object)
    assert b[:2].tolist() == [{"k": [1]}, 3.5]
    assert b.metadata.filters[0]["id"] == "pickle"


@pytest.mark.parametrize("fmt", [3, 2])
def test_arbitrary_objects_in_a_bytes_array_are_refused(fmt):
    a = cs.create_array(None, shape=(3,), dtype=object, zarr_format=fmt)
    assert a.dtype == np.dtype("O")
    with pytest.raises(CodecError, match="array '/'.*allow_unsafe_codecs=True"):
        a[:] = np.array([1, {"x": 2}, b"ok"], dtype=object)
    assert a[:].tolist() == [b"", b"", b""]  # nothing was stored
    with pytest.raises(CodecError, match="array '/'.*bytes"):
        a[1] = "a str is not bytes"


def test_array_of_python_strings_becomes_a_string_array():
    data = np.array(["a", "bcd", ""], dtype=object)
    a = cs.array(data, chunks=(2,))
    assert a.dtype == STR and a[:].tolist() == ["a", "bcd", ""]
    assert json.loads(bytes(a.store.get("zarr.json")))["data_type"] == "string"


def test_string_spellings_and_v2_filters():
    for spelling in (str, "str", "string", STR):
        assert cs.create_array(None, shape=(1,), dtype=spelling).dtype == STR
    a = cs.create_array(None, shape=(4, 3), chunks=(3, 2), dtype=str, zarr_format=2, order="F",
                        filters=[numcodecs.VLenUTF8()])
    assert a.metadata.filters == ({"id": "vlen-utf8"},)
    data = _strings(12).reshape(4, 3)
    a[...] = data
    _equal(cs.open_array(a.store, mode="r")[...], data)
    # a v3 array built from v2-style arguments still uses the vlen-utf8 array->bytes codec
    b = cs.create_array(None, shape=(2,), dtype=str, filters=[numcodecs.VLenUTF8()],
                        compressors=[numcodecs.Zstd(level=0)])
    assert [c["name"] for c in b.metadata.codecs] == ["vlen-utf8", "zstd"]


def test_big_endian_v2_types_round_trip_with_zarr_python(tmp_path):
    path = str(tmp_path / "be.zarr")
    data = np.array(["2020-01-01", "NaT", "1999-12-31T23:59:59"], dtype=">M8[s]")
    a = cs.create_array(path, shape=(3,), chunks=(2,), dtype=">M8[s]", zarr_format=2)
    a[:] = data
    assert json.loads((tmp_path / "be.zarr" / ".zarray").read_text())["dtype"] == ">M8[s]"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = zarr.open_array(path, mode="r")[:]
    np.testing.assert_array_equal(got.astype("<M8[s]").view("i8"), data.astype("<M8[s]").view("i8"))
    u = cs.create_array(None, shape=(2,), dtype=">U3", zarr_format=3)
    assert u.metadata.codecs[0] == {"name": "bytes", "configuration": {"endian": "little"}}


# -- tensorstore: only the zarr (v2) driver's "|S<n>" is supported; it adds a byte axis ----
ts = pytest.importorskip("tensorstore")


def test_tensorstore_fixed_bytes_both_directions(tmp_path):
    data = np.array([b"ab", b"hello", b"", b"xyz"], dtype="S5")
    raw = data.view(np.uint8).reshape(4, 5)
    # tensorstore writes, we read (it records fill_value null)
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(tmp_path / "t")},
                 "metadata": {"dtype": "|S5", "shape": [4], "chunks": [3], "compressor": None}},
                create=True).result()
    t[...] = raw.view("S1")
    a = cs.open_array(str(tmp_path / "t"), mode="r")
    assert a.dtype == np.dtype("S5") and a.fill_value is None
    _equal(a[...], data)
    # we write into it (tensorstore refuses zarr-python's "" fill, so keep its null), it reads
    b = cs.open_array(str(tmp_path / "t"), mode="r+")
    new = np.array([b"q", b"", b"12345", b"zz"], dtype="S5")
    b[:] = new
    # tensorstore's char arrays do not convert to NumPy here (they come out as |S0), so let
    # tensorstore decode our chunks by copying them into a fresh array, which we then read
    src = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(tmp_path / "t")}}
                  ).result()
    assert src.shape == (4, 5)
    dst = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(tmp_path / "u")},
                   "metadata": {"dtype": "|S5", "shape": [4], "chunks": [2],
                                "compressor": {"id": "zlib", "level": 1}}}, create=True).result()
    dst.write(src).result()
    _equal(cs.open_array(str(tmp_path / "u"), mode="r")[...], new)


def test_consolidated_group_with_strings_and_datetimes_opens_in_zarr_python(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = cs.group(path)
    s = g.create_array("s", shape=(3,), dtype=str, chunks=(2,))
    s[:] = ["a", "bb", "ç"]
    t = g.create_array("t", shape=(3,), dtype="M8[s]", chunks=(2,))
    t[:2] = np.array(["2020-01-01", "2021-01-01"], dtype="M8[s]")
    cs.consolidate_metadata(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_consolidated(path)
        assert z["s"][:].tolist() == ["a", "bb", "ç"]
        _equal(z["t"][:], np.array(["2020-01-01", "2021-01-01", "NaT"], dtype="M8[s]"))
