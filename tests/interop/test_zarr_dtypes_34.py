"""The data types zarr-python >= 3.2 writes (issue 32): ``struct`` records (plain, nested,
big-endian fields, datetime / bytes / raw-bytes fields, a fill value per field),
``raw_bytes`` (``V5``; v2 ``|V5``) and unit-less ``timedelta64`` / ``datetime64``, plain
and inside shards, both ways against the installed zarr-python (3.1 on Python 3.11, 3.4
on 3.12: one file for both; a cell that zarr version cannot do is skipped with the reason).

zarr writes, chunkstore reads and rewrites its document (which must stay the same); chunkstore
writes, zarr reads; the documents both write for the same array agree; tensorstore reads
records and raw bytes; chunkstore alone round-trips every case against NumPy.
"""

from __future__ import annotations

import base64
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.metadata import ArrayMetadataV2, ArrayMetadataV3

from . import normalize_codecs, read_doc

zarr = pytest.importorskip("zarr")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

ZARR = tuple(int(p) for p in zarr.__version__.split(".")[:2])
#: zarr-python >= 3.2 writes and reads the v3 ``struct`` data type; 3.1 only ``structured``
ZARR_STRUCT = ZARR >= (3, 2)


@dataclass(frozen=True)
class Case:
    dtype: np.dtype
    fill: Any = None  # None: the default
    formats: tuple[int, ...] = (3, 2)


POINT = np.dtype([("a", "<i4"), ("b", "<f8")])
NESTED = np.dtype([("id", "<u2"), ("p", [("x", "<f4"), ("y", "<f4")]), ("v", "<f8")])
BIG = np.dtype([("a", ">i4"), ("b", ">f8"), ("c", ">c8")])
FIELDS = np.dtype([("t", "<M8[s]"), ("d", "<m8[ms]"), ("s", "S3"), ("u", "<U2"),
                   ("r", "V3"), ("ok", "?")])
FILLED = np.dtype([("a", "<i4"), ("b", "<f8"), ("p", [("x", "<f4"), ("t", "<M8[ns]")])])

CASES = {
    "struct-plain": Case(POINT),
    "struct-nested": Case(NESTED),
    "struct-big-endian": Case(BIG, (-7, 2.5, 1 - 2j)),
    "struct-time-bytes-raw": Case(FIELDS),
    "struct-fill": Case(FILLED, (7, np.nan, (-0.0, 3))),
    "raw-V5": Case(np.dtype("V5"), b"\x01\x02\x03\x04\x05"),
    "raw-V5-default": Case(np.dtype("V5")),
    "m8-generic": Case(np.dtype("m8"), 5),
    "m8-generic-NaT": Case(np.dtype("m8")),
    "M8-generic-NaT": Case(np.dtype("M8")),
}
LAYOUTS = {"chunks": {}, "shards": {"shards": (8,)}}
SHAPE, CHUNKS, WRITTEN = (10,), (4,), 6  # rows 6.. stay the fill: a partial chunk and shard


def cells():
    """(case, format, layout) params; shards are v3 only."""
    out = []
    for name, case in CASES.items():
        for fmt in case.formats:
            for layout in LAYOUTS if fmt == 3 else ("chunks",):
                out.append(pytest.param(name, fmt, layout, id=f"{name}-v{fmt}-{layout}"))
    return out


def values(dtype: np.dtype, n: int, seed: int = 1) -> np.ndarray:
    """``n`` distinct, deterministic values of ``dtype`` (NaN and -0.0 among the floats)."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n, dtype=dtype)
    if dtype.names is not None:
        for i, name in enumerate(dtype.names):
            out[name] = values(dtype.fields[name][0], n, seed + i + 1)
        return out
    kind = dtype.kind
    if kind == "b":
        out[:] = np.arange(n) % 2 == 0
    elif kind in "iu":
        out[:] = rng.integers(0, 100, n) * (-1 if kind == "i" else 1) + seed
    elif kind == "f":
        out[:] = rng.standard_normal(n) * 100
        out[1:3] = (np.nan, -0.0)[:n - 1]
    elif kind == "c":
        out[:] = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    elif kind in "Mm":
        out[:] = (rng.integers(0, 10**6, n) + seed).astype(np.int64).view(
            dtype.newbyteorder("="))
    elif kind == "S":
        out[:] = [bytes([97 + (seed + i) % 26]) * dtype.itemsize for i in range(n)]
    elif kind == "U":
        out[:] = [chr(65 + (seed + i) % 26) * (dtype.itemsize // 4) for i in range(n)]
    else:  # raw bytes, none all zero
        out.view(np.uint8)[:] = rng.integers(1, 256, n * dtype.itemsize, dtype=np.uint8)
    return out


def expected(case: Case, fill: Any) -> np.ndarray:
    """What a reader sees: the written rows, then the fill value."""
    data = values(case.dtype, SHAPE[0])
    data[WRITTEN:] = np.array(fill, dtype=case.dtype)
    return data


def same_bits(got: Any, want: np.ndarray) -> None:
    """Equal bit for bit (NaN payloads and -0.0 included), whatever the byte order."""
    got = np.asarray(got)
    assert got.shape == want.shape
    assert got.dtype.newbyteorder("<") == want.dtype.newbyteorder("<"), (got.dtype, want.dtype)
    assert got.astype(want.dtype).tobytes() == want.tobytes()


def zarr_fill(case: Case) -> dict[str, Any]:
    return {} if case.fill is None else {"fill_value": case.fill}


def _has_time_field(dtype: np.dtype) -> bool:
    if dtype.names is None:
        return False
    return any(_has_time_field(f) or f.kind in "Mm"
               for f in (dtype.fields[n][0] for n in dtype.names))


def zarr_write(case: Case, fmt: int, layout: str, path: Path, **kw: Any):
    if fmt == 2 and _has_time_field(case.dtype):
        # zarr-python hands v2 records to numcodecs as they are, which refuses a buffer with
        # datetime fields ("cannot include dtype 'M' in a buffer"): no compressor there
        kw.setdefault("compressors", None)
    z = zarr.create_array(store=str(path), shape=SHAPE, chunks=CHUNKS, dtype=case.dtype,
                          zarr_format=fmt, **zarr_fill(case), **LAYOUTS[layout], **kw)
    z[:WRITTEN] = values(case.dtype, SHAPE[0])[:WRITTEN]
    return z


def cs_write(case: Case, fmt: int, layout: str, path: Path, **kw: Any):
    a = cs.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=case.dtype,
                        zarr_format=fmt, **zarr_fill(case), **LAYOUTS[layout], **kw)
    a[:WRITTEN] = values(case.dtype, SHAPE[0])[:WRITTEN]
    return a


def doc_name(fmt: int) -> str:
    return "zarr.json" if fmt == 3 else ".zarray"


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A document with its codec entries' absent configuration as ``{}`` and no empty
    ``storage_transformers`` (both spellings mean the same; chunkstore writes the first
    and leaves out the second)."""
    doc = dict(doc)
    if doc.get("storage_transformers") == []:
        del doc["storage_transformers"]
    if "codecs" in doc:
        doc["codecs"] = normalize_codecs(doc["codecs"])
        for c in doc["codecs"]:
            if c["name"] == "sharding_indexed":
                for key in ("codecs", "index_codecs"):
                    c["configuration"][key] = normalize_codecs(c["configuration"][key])
    return doc


def _nested(dtype: np.dtype) -> bool:
    return dtype.names is not None and any(dtype.fields[n][0].names is not None
                                           for n in dtype.names)


def zarr_cannot(name: str, fmt: int, layout: str, zarr_writes: bool) -> str | None:
    """Why the installed zarr-python cannot do this cell (None: it can). Each reason was
    seen with zarr-python 3.1.6; 3.4 does them all."""
    case, old = CASES[name], f"zarr-python {zarr.__version__} (< 3.2)"
    if ZARR_STRUCT:
        return None
    if case.dtype.names is not None and fmt == 3 and not zarr_writes:
        return f"{old} does not know the v3 'struct' data type (only 'structured')"
    if "r" in (case.dtype.names or ()):
        return f"{old} cannot encode a raw-bytes field's fill value (a bytes-like object " \
               "is required)"
    if _nested(case.dtype) and fmt == 2:
        return f"{old} cannot parse a nested v2 record dtype"
    if name == "struct-big-endian" and fmt == 3:
        return f"{old} stores big-endian record fields as they are under a 'bytes' codec " \
               "without endian, which reads back as little-endian (its own reads too)"
    if case.dtype.str.endswith("M8"):
        return f"{old} cannot parse the fill value of a unit-less datetime64, even its own"
    if layout == "shards" and (case.dtype.kind == "V" or case.fill is not None):
        return f"{old} cannot shard {case.dtype} with this fill value (it hashes the fill: " \
               "unhashable void scalar / generic timedelta64)"
    return None


def skip_unless_zarr_can(name: str, fmt: int, layout: str, zarr_writes: bool) -> None:
    reason = zarr_cannot(name, fmt, layout, zarr_writes)
    if reason:
        pytest.skip(reason)


# -- zarr-python writes, chunkstore reads and rewrites -----------------------------------------
@pytest.mark.parametrize(("name", "fmt", "layout"), cells())
def test_zarr_writes_chunkstore_reads(tmp_path, name, fmt, layout):
    case = CASES[name]
    skip_unless_zarr_can(name, fmt, layout, zarr_writes=True)
    path = tmp_path / "z.zarr"
    z = zarr_write(case, fmt, layout, path)
    want = expected(case, z.fill_value)
    a = cs.open_array(str(path), mode="r+")
    same_bits(a[...], want)
    same_bits(np.asarray(a.fill_value, dtype=case.dtype), np.asarray(z.fill_value, case.dtype))
    same_bits(a[7:9], want[7:9])  # fill rows only
    before = read_doc(path, doc_name(fmt))
    if fmt == 3 and case.dtype.names is not None:
        assert before["data_type"]["name"] == ("struct" if ZARR_STRUCT else "structured")
    a.resize(11)  # two rewrites of the document by chunkstore
    a.resize(10)
    after = read_doc(path, doc_name(fmt))
    assert comparable(after) == comparable(before)
    same_bits(zarr.open_array(str(path), mode="r")[...], want)  # zarr still reads it


# -- chunkstore writes, zarr-python reads ------------------------------------------------------
@pytest.mark.parametrize(("name", "fmt", "layout"), cells())
def test_chunkstore_writes_zarr_reads(tmp_path, name, fmt, layout):
    case = CASES[name]
    skip_unless_zarr_can(name, fmt, layout, zarr_writes=False)
    path = tmp_path / "c.zarr"
    a = cs_write(case, fmt, layout, path)
    want = expected(case, a.fill_value)
    z = zarr.open_array(str(path), mode="r")
    same_bits(z[...], want)
    same_bits(np.asarray(z.fill_value, case.dtype), np.asarray(a.fill_value, case.dtype))
    if fmt == 3 and case.dtype.names is not None:
        assert read_doc(path)["data_type"]["name"] == "struct"


@pytest.mark.parametrize(("name", "fmt", "layout"), cells())
def test_documents_agree(tmp_path, name, fmt, layout):
    """chunkstore writes the document zarr-python writes for the same array (no compressor,
    the one place their defaults differ)."""
    case = CASES[name]
    skip_unless_zarr_can(name, fmt, layout, zarr_writes=True)
    if fmt == 3 and case.dtype.names is not None and not ZARR_STRUCT:
        pytest.skip(f"zarr-python {zarr.__version__} (< 3.2) writes the legacy 'structured'")
    zarr_write(case, fmt, layout, tmp_path / "z.zarr", compressors=None)
    cs_write(case, fmt, layout, tmp_path / "c.zarr", compressors=None)
    ours = comparable(read_doc(tmp_path / "c.zarr", doc_name(fmt)))
    theirs = comparable(read_doc(tmp_path / "z.zarr", doc_name(fmt)))
    assert ours == theirs


# -- the legacy "structured" (zarr-python 3.1, older chunkstore) -------------------------------
LEGACY_DOC = {
    "zarr_format": 3, "node_type": "array", "shape": [5],
    "data_type": {"name": "structured", "configuration": {"fields": [
        ["a", "int32"], ["p", {"name": "structured", "configuration": {"fields": [
            ["x", "float32"], ["y", "uint8"]]}}]]}},
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": base64.b64encode(np.array((9, (0.5, 3)), dtype=[
        ("a", "<i4"), ("p", [("x", "<f4"), ("y", "u1")])]).tobytes()).decode(),
    "codecs": [{"name": "bytes", "configuration": {}}], "attributes": {},
}
LEGACY_DTYPE = np.dtype([("a", "<i4"), ("p", [("x", "<f4"), ("y", "u1")])])


def test_legacy_structured_read_kept_and_read_by_zarr(tmp_path):
    path = tmp_path / "legacy.zarr"
    path.mkdir()
    (path / "zarr.json").write_text(json.dumps(LEGACY_DOC))
    data = values(LEGACY_DTYPE, 2)
    (path / "c").mkdir()
    (path / "c" / "0").write_bytes(data.tobytes())  # no endian: little, as the spec says
    want = np.array([*data, (9, (0.5, 3)), (9, (0.5, 3)), (9, (0.5, 3))], dtype=LEGACY_DTYPE)
    a = cs.open_array(str(path), mode="r+")
    same_bits(a[...], want)
    a.attrs["by"] = "chunkstore"  # a rewrite keeps the name older readers know
    doc = read_doc(path)
    assert doc["data_type"] == LEGACY_DOC["data_type"]
    assert doc["fill_value"] == LEGACY_DOC["fill_value"]
    same_bits(zarr.open_array(str(path), mode="r")[...], want)
    a[3] = want[0]
    want[3] = want[0]
    same_bits(zarr.open_array(str(path), mode="r")[...], want)


# -- tensorstore --------------------------------------------------------------------------------
def _ts_bytes(got: np.ndarray) -> bytes:
    """The bytes of tensorstore's ``byte`` array (NumPy shows it as ``V0`` items)."""
    class View:
        __array_interface__ = {**got.__array_interface__, "typestr": "|u1",
                               "descr": [("", "|u1")]}
    return np.array(View(), copy=True).tobytes()  # ``got`` stays alive meanwhile


def _ts_open(path: Path, fmt: int, **kw: Any):
    ts = pytest.importorskip("tensorstore")
    return ts.open({"driver": "zarr3" if fmt == 3 else "zarr",
                    "kvstore": {"driver": "file", "path": str(path)}, **kw}).result()


@pytest.mark.parametrize("fmt", [3, 2])
def test_tensorstore_reads_struct_fields(tmp_path, fmt):
    """tensorstore reads one field at a time (flat records only: no nested ones)."""
    path = tmp_path / "c.zarr"
    case = CASES["struct-big-endian"]
    a = cs_write(case, fmt, "chunks", path)
    want = expected(case, a.fill_value)
    for field in case.dtype.names:
        got = _ts_open(path, fmt, field=field).read().result()
        assert got.astype(want[field].dtype).tobytes() == want[field].tobytes()


@pytest.mark.parametrize("fmt", [3, 2])
def test_tensorstore_reads_raw_bytes(tmp_path, fmt):
    """tensorstore shows raw bytes as one more axis of single bytes."""
    path = tmp_path / "c.zarr"
    case = CASES["raw-V5"]
    a = cs_write(case, fmt, "shards" if fmt == 3 else "chunks", path)
    want = expected(case, a.fill_value)
    got = _ts_open(path, fmt).read().result()
    assert got.shape == (10, 5)
    assert _ts_bytes(got) == want.tobytes()


def test_tensorstore_writes_struct_chunkstore_reads(tmp_path):
    path = tmp_path / "t.zarr"
    spec = {"shape": [5], "chunk_grid": {"name": "regular",
                                         "configuration": {"chunk_shape": [2]}},
            "data_type": {"name": "struct", "configuration": {"fields": [
                {"name": "a", "data_type": "int32"}, {"name": "b", "data_type": "float64"}]}},
            "fill_value": {"a": 3, "b": 1.5}}
    t = _ts_open(path, 3, field="a", metadata=spec, create=True)
    t[:3] = np.array([1, -2, 4], dtype=np.int32)
    a = cs.open_array(str(path))
    same_bits(a[...], np.array([(1, 1.5), (-2, 1.5), (4, 1.5), (3, 1.5), (3, 1.5)], POINT))
    same_bits(np.asarray(a.fill_value, POINT), np.array((3, 1.5), POINT))


# -- chunkstore alone, against NumPy -----------------------------------------------------------
@pytest.mark.parametrize(("name", "fmt", "layout"), cells())
def test_round_trip_against_numpy(tmp_path, name, fmt, layout):
    case = CASES[name]
    path = tmp_path / "c.zarr"
    a = cs_write(case, fmt, layout, path)
    want = expected(case, a.fill_value)
    same_bits(a[...], want)
    more = values(case.dtype, 4, seed=9)
    a[[1, 7, 8, 9]] = more  # across chunks and shards, into the fill region
    want[[1, 7, 8, 9]] = more
    same_bits(a[...], want)
    same_bits(a[::3], want[::3])
    b = cs.open_array(str(path), mode="r")
    same_bits(b[...], want)
    same_bits(np.asarray(b.fill_value, case.dtype), np.asarray(a.fill_value, case.dtype))
    doc = read_doc(path, doc_name(fmt))
    meta = (ArrayMetadataV3 if fmt == 3 else ArrayMetadataV2).from_json(doc, "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert comparable(json.loads(json.dumps(meta.to_json()))) == comparable(doc)
