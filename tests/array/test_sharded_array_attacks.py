"""Red team, round 9: sharded arrays (index at the start or end, written by zarr-python or
chunkstore, every selection kind, inner chunks set back to fill, resize and append),
dtypes at the edges with fill values crossing zarr-python both ways, and hostile
stores made with raw file writes (shard indexes that lie, absurd codec parameters,
shards of billions of inner chunks, grids of billions of chunks).

Every test asserts the exact final content (NumPy as the oracle, zarr-python reading
the same files, the bytes on disk) or an exact exception type. Tests that exposed a bug
are ``xfail(strict=True)`` with the reason.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import warnings

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError, CodecError, MetadataError
from tests.code_child import run_code

zarr = pytest.importorskip("zarr")

B = {"name": "bytes", "configuration": {"endian": "little"}}


def _v3_doc(shape, chunks, codecs, dtype="int32", fill=0, **extra):
    return {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill, "codecs": codecs, **extra}


def _raw_array(tmp_path, doc, name="h.zarr", key="zarr.json"):
    root = tmp_path / name
    root.mkdir()
    (root / key).write_text(json.dumps(doc))
    return str(root)


def _files(root):
    return sorted(os.path.relpath(os.path.join(r, f), root)
                  for r, _, fs in os.walk(root) for f in fs)


#: set first in every child: after the imports, ``cpu`` more CPU seconds (RLIMIT_CPU), so
#: "bounded time" is the child's own work, whatever the load of the machine
def _child(code: str, cpu: int = 3) -> str:
    """Run ``code`` in a process of its own (tests/code_child.py: from the suite's fork
    server) allowed ``cpu`` CPU seconds; its last stdout line, or 'HANG' when it ran out
    of CPU time."""
    r = run_code(textwrap.dedent(code), cpu=cpu)
    if r.returncode == -signal.SIGXCPU:
        return "HANG"
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


# =========================================================================================
# 1. Sharded arrays: every selection kind, index at start / end, both writers
# =========================================================================================
SHAPE, CHUNKS, SHARDS = (13, 11), (2, 3), (4, 6)


def _ix(sel, shape):
    """Orthogonal selection -> index arrays per axis (NumPy np.ix_ oracle)."""
    out = []
    for s, n in zip(sel, shape, strict=True):
        if isinstance(s, slice):
            out.append(np.arange(n)[s])
        else:
            s = np.asarray(s)
            out.append(np.flatnonzero(s) if s.dtype == bool else s)
    return np.ix_(*out)


def _blocks_region(sel):
    """Region of ``blocks[sel]`` on the (2, 3) inner chunk grid of a (13, 11) array."""
    grid = (7, 4)
    region = []
    for s, g, c, n in zip(sel, grid, CHUNKS, SHAPE, strict=True):
        idx = np.arange(g)[s]
        idx = np.atleast_1d(idx)
        region.append(slice(int(idx[0]) * c, min(n, (int(idx[-1]) + 1) * c)))
    return tuple(region)


STEPS = [
    ("basic", (slice(1, 12, 3), slice(None, None, -2))),
    ("basic", (slice(None, None, -1), 4)),
    ("basic", (Ellipsis, slice(10, 0, -4))),
    ("basic", (-1, slice(-3, None))),
    ("oindex", ([0, 5, 12, 3], [10, 0, 2])),
    ("oindex", (np.arange(13) % 3 == 0, slice(None, None, -3))),
    ("vindex", ([0, 12, 5, 5], [10, 0, 3, 4])),
    ("mask", 0.2),
    ("blocks", (slice(1, 3), 2)),
    ("blocks", (-1, -1)),
]


@pytest.mark.parametrize("writer", ["zarr", "chunkstore"])
@pytest.mark.parametrize("location", ["start", "end"])
def test_sharded_every_selection_kind_matches_numpy_and_zarr(tmp_path, writer, location):
    """Partial writes of every kind into shards whose index lies at the start or end,
    created by either library; after every step chunkstore and zarr-python read exactly
    the NumPy result; setting everything back to fill leaves no shard on disk."""
    path = str(tmp_path / "s.zarr")
    shards = {"shape": SHARDS, "index_location": location}
    if writer == "zarr":
        zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, shards=shards, dtype="i4",
                          fill_value=-1)
    else:
        cs.create_array(path, shape=SHAPE, chunks=CHUNKS, shards=shards, dtype="i4",
                        fill_value=-1)
    doc = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())
    assert doc["codecs"][0]["configuration"]["index_location"] == location
    a = cs.open_array(path, mode="r+")
    rng = np.random.default_rng(9)
    exp = np.full(SHAPE, -1, "i4")
    for kind, sel in STEPS:
        if kind == "basic":
            v = rng.integers(0, 1000, size=exp[sel].shape).astype("i4")
            a[sel] = v
            exp[sel] = v
        elif kind == "oindex":
            ix = _ix(sel, SHAPE)
            v = rng.integers(0, 1000, size=exp[ix].shape).astype("i4")
            a.oindex[sel] = v
            exp[ix] = v
        elif kind == "vindex":
            v = rng.integers(0, 1000, size=len(sel[0])).astype("i4")
            a.vindex[sel] = v
            exp[tuple(np.asarray(s) for s in sel)] = v
        elif kind == "mask":
            m = rng.random(SHAPE) < sel
            v = rng.integers(0, 1000, size=int(m.sum())).astype("i4")
            a.vindex[m] = v
            exp[m] = v
        else:
            region = _blocks_region(sel)
            v = rng.integers(0, 1000, size=exp[region].shape).astype("i4")
            a.blocks[sel] = v
            exp[region] = v
        np.testing.assert_array_equal(a[...], exp, err_msg=f"{kind} {sel}")
        np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], exp,
                                      err_msg=f"{kind} {sel}")
    # negative-step reads of the same content
    np.testing.assert_array_equal(a[::-3, ::-2], exp[::-3, ::-2])
    np.testing.assert_array_equal(a.oindex[[12, 0, 7], ::-1], exp[[12, 0, 7]][:, ::-1])
    # inner chunks back to fill, one by one: the rest survive, then nothing is stored
    a[0:2, 0:3] = -1
    exp[0:2, 0:3] = -1
    np.testing.assert_array_equal(a[...], exp)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], exp)
    a[...] = -1
    assert _files(path) == ["zarr.json"]
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], np.full(SHAPE, -1))


@pytest.mark.parametrize("location", ["start", "end"])
def test_sharded_resize_shrink_grow_and_append_each_axis(tmp_path, location):
    """Shrink then grow: no stale inner chunk reappears (NaN fill); append along each axis
    at a shard edge; shrink to a 0-length axis and back."""
    path = str(tmp_path / "r.zarr")
    a = cs.create_array(path, shape=(10, 9), chunks=(2, 3),
                        shards={"shape": (4, 6), "index_location": location}, dtype="f8",
                        fill_value=np.nan)
    d = np.arange(90, dtype="f8").reshape(10, 9)
    a[...] = d
    a.resize(3, 4)
    a.resize(10, 9)
    exp = np.full((10, 9), np.nan)
    exp[:3, :4] = d[:3, :4]
    np.testing.assert_array_equal(a[...], exp)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], exp)
    a.append(np.ones((3, 9)), axis=0)
    exp = np.concatenate([exp, np.ones((3, 9))], 0)
    a.append(np.full((13, 5), 2.0), axis=1)
    exp = np.concatenate([exp, np.full((13, 5), 2.0)], 1)
    assert a.shape == (13, 14)
    np.testing.assert_array_equal(a[...], exp)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], exp)
    a.resize(0, 14)
    assert _files(path) == ["zarr.json"]
    a.resize(5, 14)
    np.testing.assert_array_equal(a[...], np.full((5, 14), np.nan))


@pytest.mark.parametrize("location", ["start", "end"])
def test_sharded_zero_d_int64_extremes(tmp_path, location):
    """A 0-d sharded int64 array with fill 2**63-1: -2**63 round-trips (zarr-python too);
    writing the fill value back deletes the shard."""
    path = str(tmp_path / "z.zarr")
    a = cs.create_array(path, shape=(), chunks=(), dtype="i8", fill_value=2**63 - 1,
                        shards={"shape": (), "index_location": location})
    a[()] = -2**63
    assert a[()] == -2**63
    assert zarr.open_array(path, mode="r")[()] == -2**63
    a[...] = 2**63 - 1
    assert _files(path) == ["zarr.json"]
    assert cs.open_array(path)[()] == 2**63 - 1


def _crc(raw: bytes) -> bytes:
    return bytes(numcodecs.CRC32C().encode(raw))[-4:]


def _handmade_shard(tmp_path, location, order, pad=0, lie=None):
    """An (8,) <i4 array, one shard of 4 uncompressed inner chunks of 2, stored in
    ``order`` with ``pad`` unused bytes after each; ``lie=(i, (offset, nbytes))``
    overrides one index entry."""
    path = str(tmp_path / "x.zarr")
    cs.create_array(path, shape=(8,), chunks=(2,), dtype="<i4", fill_value=-1,
                    shards={"shape": (8,), "index_location": location}, compressors=None)
    data = np.arange(8, dtype="<i4") * 10
    blobs = [data[i * 2:(i + 1) * 2].tobytes() for i in range(4)]
    n_index = 4 * 16 + 4
    base = n_index if location == "start" else 0
    payload, index = b"", [None] * 4
    for i in order:
        index[i] = (base + len(payload), len(blobs[i]))
        payload += blobs[i] + b"\xee" * pad
    if lie is not None:
        index[lie[0]] = lie[1]
    raw = np.array(index, "<u8").tobytes()
    raw += _crc(raw)
    shard = raw + payload if location == "start" else payload + raw
    os.makedirs(os.path.join(path, "c"), exist_ok=True)
    with open(os.path.join(path, "c", "0"), "wb") as f:
        f.write(shard)
    return path, data


@pytest.mark.parametrize("location", ["start", "end"])
def test_shard_inner_chunks_out_of_order_with_gaps(tmp_path, location):
    """Inner chunks stored in reverse-ish order with unused bytes between them (valid per
    the spec): read exactly, and a partial write keeps the others (zarr-python agrees)."""
    path, data = _handmade_shard(tmp_path, location, [3, 1, 0, 2], pad=3)
    a = cs.open_array(path, mode="r+")
    np.testing.assert_array_equal(a[...], data)
    a[3] = 7
    data[3] = 7
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("delta", [3, -4])
def test_shard_entry_with_wrong_nbytes_refused_on_read(tmp_path, location, delta):
    """An index entry of an uncompressed inner chunk claiming 3 bytes more (there is room)
    or 4 bytes fewer than the chunk takes: ChunkDecodeError naming the shard key."""
    base = 68 if location == "start" else 0
    path, _ = _handmade_shard(tmp_path, location, [0, 1, 2, 3], pad=3,
                              lie=(1, (base + 11, 8 + delta)))
    a = cs.open_array(path, mode="r+")
    with pytest.raises(ChunkDecodeError, match=r"c/0"):
        a[...]
    with pytest.raises(ChunkDecodeError, match=r"c/0"):
        a[2:4]


@pytest.mark.xfail(strict=True, reason="documented limit (README, Bounded memory on hostile "
                   "data): with the index at the end a read fetches it by a suffix range and "
                   "cannot see the shard's size, so an entry pointing into the index decodes "
                   "index bytes; writes and verify refuse it")
def test_shard_entry_pointing_into_the_end_index_is_refused_on_read(tmp_path):
    """Index at the end of a 100-byte shard (32 payload bytes + 68 index bytes); inner
    chunk 1's entry says (offset 32, nbytes 8): the first 8 bytes of the index itself.

    Observed: ``a[...]`` returns ``[0, 10, 0, 0, 40, ...]`` (the index's first uint64,
    offset 0, read as two int32) — a silent wrong answer — while a partial write of the
    same shard refuses it (``ShardingCodec.parse`` knows the size). With the index at
    the start, the read path refuses it too."""
    path, _ = _handmade_shard(tmp_path, "end", [0, 1, 2, 3], lie=(1, (32, 8)))
    a = cs.open_array(path, mode="r+")
    with pytest.raises(ChunkDecodeError, match=r"c/0"):
        a.__setitem__(0, 5)
    with pytest.raises(ChunkDecodeError, match=r"c/0.*inner chunk \(1,\).*outside the shard"):
        a[...]
    with pytest.raises(ChunkDecodeError, match=r"c/0.*inner chunk \(1,\).*outside the shard"):
        a[2:4]  # the lying chunk alone: its bytes are all inside the object


def test_shard_entry_pointing_into_the_start_index_is_refused(tmp_path):
    path, _ = _handmade_shard(tmp_path, "start", [0, 1, 2, 3], lie=(1, (0, 8)))
    a = cs.open_array(path, mode="r+")
    with pytest.raises(ChunkDecodeError, match=r"c/0"):
        a[...]
    with pytest.raises(ChunkDecodeError, match=r"c/0"):
        a[0] = 5


# =========================================================================================
# 2. Dtypes at the edges; fill values across zarr-python both ways
# =========================================================================================
FILLS = [
    ("f8", np.nan), ("f8", np.inf), ("f8", -np.inf), ("f2", np.nan),
    ("i8", 2**63 - 1), ("i8", -2**63), ("u8", 2**64 - 1), ("u8", 2**63 + 1), ("i8", 2**53 + 1),
    ("c8", complex(np.inf, 1)), ("M8[ns]", np.datetime64("NaT")), ("m8[s]", np.timedelta64("NaT")),
    ("M8[D]", np.datetime64("1970-01-02")), ("bool", True), ("S5", b"ab\x00c"),
    ("U3", "\u00e9\x00z"), (">i4", 5), (">f8", np.nan),
]


def _fill_round_trip(tmp_path, dtype, fill, zarr_format, writer):
    path = str(tmp_path / f"f_{writer}.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if writer == "chunkstore":
            cs.create_array(path, shape=(5,), chunks=(2,), dtype=dtype, fill_value=fill,
                            zarr_format=zarr_format)
        else:
            zarr.create_array(path, shape=(5,), chunks=(2,), dtype=dtype, fill_value=fill,
                              zarr_format=zarr_format)
        ours = cs.open_array(path, mode="r")[...]
        theirs = np.asarray(zarr.open_array(path, mode="r")[...])
    want = np.full(5, np.array([fill], dtype=dtype)[0], dtype=dtype)
    return ours, theirs, want


@pytest.mark.parametrize("writer", ["chunkstore", "zarr"])
@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("dtype, fill", FILLS, ids=[f"{d}-{f!r}" for d, f in FILLS])
def test_fill_value_round_trip_bit_exact(tmp_path, dtype, fill, zarr_format, writer):
    ours, theirs, want = _fill_round_trip(tmp_path, dtype, fill, zarr_format, writer)
    assert ours.dtype == theirs.dtype
    assert ours.tobytes() == want.astype(ours.dtype).tobytes()
    assert theirs.tobytes() == ours.tobytes()


NEG_ZERO = [("f8", -0.0), ("f4", -0.0), ("f2", -0.0), ("c16", complex(np.nan, -0.0)),
            ("c16", complex(-0.0, np.nan))]


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("dtype, fill", NEG_ZERO, ids=[f"{d}-{f!r}" for d, f in NEG_ZERO])
def test_negative_zero_fill_value_kept(tmp_path, dtype, fill, zarr_format):
    """``create_array(fill_value=-0.0)``: the handle reads -0.0, but zarr.json /
    .zarray says ``"fill_value": 0`` (``metadata/dtypes.py`` ``_float_to_json`` returns
    ``int(f)`` for integral floats), so on reopen — by chunkstore or zarr-python — every
    unwritten element reads +0.0. zarr-python writes ``-0.0`` and reads it back."""
    ours, theirs, want = _fill_round_trip(tmp_path, dtype, fill, zarr_format, "chunkstore")
    assert ours.tobytes() == want.tobytes()
    assert theirs.tobytes() == want.tobytes()


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_negative_zero_fill_from_zarr_python_is_read(tmp_path, zarr_format):
    """The other direction works: zarr-python's ``-0.0`` is read with its sign."""
    ours, theirs, want = _fill_round_trip(tmp_path, "f8", -0.0, zarr_format, "zarr")
    assert np.signbit(ours).all() and np.signbit(theirs).all()
    assert ours.tobytes() == want.tobytes()


EDGE_DTYPES = [
    ("M8[s]", np.datetime64("NaT"),
     np.array(["2020-01-01", "NaT", "1970-01-01", "NaT"], "M8[s]")),
    ("m8[ms]", np.timedelta64("NaT"), np.array([1, -1, 0, 5], "m8[ms]")),
    ("c8", complex(np.nan, np.nan), np.array([1 + 1j, np.nan, complex(np.nan, 0), 0], "c8")),
    ("S3", b"", np.array([b"a", b"", b"abc", b"\x00\x00"], "S3")),
    ("U2", "", np.array(["\u00e9", "", "ab", "\U0001F600"], "U2")),
    ("bool", False, np.array([True, False, True, True])),
    (">u2", 65535, np.array([1, 65535, 256, 0], ">u2")),
]


@pytest.mark.parametrize("layout", [(3, None), (3, (6,)), (2, None)],
                         ids=["v3", "v3-sharded", "v2"])
@pytest.mark.parametrize("dtype, fill, vals", EDGE_DTYPES, ids=[d for d, _, _ in EDGE_DTYPES])
def test_edge_dtypes_partial_writes_and_back_to_fill(tmp_path, dtype, fill, vals, layout):
    """Stepped, reversed and duplicate-index writes of edge dtypes (NaT fill, NaN fill,
    bytes with NULs, astral unicode, big-endian): bit-exact vs NumPy and zarr-python;
    writing the fill everywhere leaves no chunk on disk."""
    fmt, shards = layout
    path = str(tmp_path / "e.zarr")
    a = cs.create_array(path, shape=(12,), chunks=(2,), dtype=dtype, zarr_format=fmt,
                        fill_value=fill, shards=shards)
    exp = np.full(12, fill, dtype=dtype)
    a[1:12:3] = vals
    exp[1:12:3] = vals
    a.oindex[[10, 2, 10]] = vals[:3]
    exp[[10, 2, 10]] = vals[:3]
    a[::-5] = vals[:3]
    exp[::-5] = vals[:3]
    got = a[...]
    native = exp.dtype.newbyteorder("=")  # v3 reads big-endian data as the native type
    assert got.dtype.newbyteorder("=") == native
    assert got.astype(native).tobytes() == exp.astype(native).tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = np.asarray(zarr.open_array(path, mode="r")[...])
    assert theirs.astype(native).tobytes() == exp.astype(native).tobytes()
    a[...] = fill
    assert [f for f in _files(path) if f not in ("zarr.json", ".zarray", ".zattrs")] == []


# =========================================================================================
# 3. Hostile metadata: absurd codec parameters
# =========================================================================================
def _blosc(**cfg):
    base = {"typesize": 4, "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0}
    return [B, {"name": "blosc", "configuration": {**base, **cfg}}]


def _shard(**cfg):
    base = {"chunk_shape": [3, 1], "codecs": [B], "index_codecs": [B]}
    return [{"name": "sharding_indexed", "configuration": {**base, **cfg}}]


REFUSED = {
    "blosc-clevel-50": _blosc(clevel=50),
    "blosc-cname": _blosc(cname="evil"),
    "blosc-shuffle": _blosc(shuffle="weird"),
    "gzip-99": [B, {"name": "gzip", "configuration": {"level": 99}}],
    "transpose-dup": [{"name": "transpose", "configuration": {"order": [0, 0]}}, B],
    "transpose-oob": [{"name": "transpose", "configuration": {"order": [0, 5]}}, B],
    "transpose-short": [{"name": "transpose", "configuration": {"order": [1]}}, B],
    "transpose-neg": [{"name": "transpose", "configuration": {"order": [-1, 0]}}, B],
    "transpose-str": [{"name": "transpose", "configuration": {"order": "F"}}, B],
    "bytes-endian": [{"name": "bytes", "configuration": {"endian": "middle"}}],
    "two-bytes": [B, B],
    "compressor-first": [{"name": "zstd", "configuration": {"level": 1}}],
    "shard-not-divisor": _shard(chunk_shape=[2, 2]),
    "shard-zero": _shard(chunk_shape=[0, 2]),
    "shard-huge": _shard(chunk_shape=[2**70, 1]),
    "shard-location": _shard(index_location="middle"),
    "shard-index-gzip": _shard(index_codecs=[B, {"name": "gzip", "configuration": {"level": 1}}]),
    "shard-no-codecs": _shard(codecs=[]),
    "unknown": [B, {"name": "evilcodec"}],
    "pickle": [B, {"name": "numcodecs.pickle"}],
}


def _open_write_read(path):
    a = cs.open_array(path, mode="r+")
    d = np.arange(24, dtype="i4").reshape(6, 4)
    a[...] = d
    a[1, 1] = 99
    d[1, 1] = 99
    return cs.open_array(path, mode="r")[...], d


@pytest.mark.parametrize("name", list(REFUSED))
def test_absurd_codec_parameters_refused_with_chunkstore_error(tmp_path, name):
    path = _raw_array(tmp_path, _v3_doc((6, 4), (3, 2), REFUSED[name]))
    with pytest.raises((CodecError, MetadataError)):
        _open_write_read(path)
    assert _files(path) == ["zarr.json"]


RAW_ERRORS = {
    "blosc-typesize-0": _blosc(typesize=0),
    "blosc-typesize-neg": _blosc(typesize=-4),
    "blosc-blocksize-2**40": _blosc(blocksize=2**40),
    "shard-chunk-shape-str": _shard(chunk_shape="abc"),
}


@pytest.mark.parametrize("name", list(RAW_ERRORS))
def test_absurd_codec_parameters_escape_as_raw_errors(tmp_path, name):
    """Observed: ``ValueError: Cannot use typesize 0 less than 1.`` (numcodecs Blosc
    built in ``codecs/compressors.py``; ``registry.codec_from_json`` does not wrap it)
    on the first read; ``OverflowError: value too large to convert to int`` from
    ``numcodecs.blosc.compress`` on the first write (blocksize never checked);
    ``ValueError: invalid literal for int()`` from ``codecs/sharding.py``
    ``inner_chunk_shape`` (called by ``array_snapshot``) on the first read. None names
    the document or field. Expected: CodecError/MetadataError naming zarr.json."""
    path = _raw_array(tmp_path, _v3_doc((6, 4), (3, 2), RAW_ERRORS[name]))
    with pytest.raises((CodecError, MetadataError), match="zarr.json"):
        _open_write_read(path)


SILENTLY_TAKEN = {
    "shard-chunk-shape-float": _shard(chunk_shape=[1.5, 1]),
    "blosc-typesize-str": _blosc(typesize="4"),
    "blosc-typesize-float": _blosc(typesize=4.5),
    "zstd-level-100": [B, {"name": "zstd", "configuration": {"level": 100, "checksum": False}}],
}


@pytest.mark.parametrize("name", list(SILENTLY_TAKEN))
def test_out_of_spec_codec_parameters_silently_accepted(tmp_path, name):
    """zarr-python refuses every one of these documents (``Expected an iterable of
    integers``, ``Value must be an int``, ``level must be <= 22``). chunkstore truncates
    ``chunk_shape [1.5, 1]`` to ``[1, 1]`` (``int(c)`` in ``ShardingCodec.__init__``)
    and writes data under metadata no peer can open."""
    path = _raw_array(tmp_path, _v3_doc((6, 4), (3, 2), SILENTLY_TAKEN[name]))
    with pytest.raises((TypeError, ValueError)):  # zarr-python refuses the document
        zarr.open_array(path, mode="r")[...]
    with pytest.raises((CodecError, MetadataError)):
        _open_write_read(path)


def test_create_with_zstd_level_100_stays_readable_by_zarr_python(tmp_path):
    """Principle 1 (format-compatible). Observed: chunkstore writes
    ``{"name": "zstd", "configuration": {"level": 100}}``; ``zarr.open_array`` raises
    ``ValueError: Value must be less than or equal to 22``. Expected: refuse the level
    (CodecError) or clamp it to zstd's 22 before writing the metadata."""
    path = str(tmp_path / "z.zarr")
    try:
        a = cs.create_array(path, shape=(4,), chunks=(2,), dtype="i4",
                            compressors=numcodecs.Zstd(level=100))
    except (CodecError, MetadataError, ValueError):
        return
    a[...] = [1, 2, 3, 4]
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], [1, 2, 3, 4])


def test_v2_blosc_shuffle_out_of_range(tmp_path):
    """``.zarray`` with ``compressor: {"id": "blosc", "shuffle": 7}``. Observed:
    ``IndexError: list index out of range``. Expected: CodecError naming .zarray."""
    path = _raw_array(tmp_path, {
        "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "fill_value": 0,
        "order": "C", "filters": None,
        "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 7}},
        key=".zarray")
    with pytest.raises((CodecError, MetadataError), match=r"\.zarray"):
        a = cs.open_array(path, mode="r+")
        a[...] = 1
        a[...]


@pytest.mark.parametrize("sep", ["../", "/..", "\\", "", "//", ".."])
def test_key_separators_escaping_the_root_refused(tmp_path, sep):
    v3 = _v3_doc((4,), (2,), [B])
    v3["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": sep}}
    p3 = _raw_array(tmp_path, v3, name="v3.zarr")
    p2 = _raw_array(tmp_path, {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4",
                               "compressor": None, "fill_value": 0, "order": "C",
                               "filters": None, "dimension_separator": sep},
                    name="v2.zarr", key=".zarray")
    for path in (p3, p2):
        with pytest.raises(MetadataError, match="separator"):
            cs.open_array(path, mode="r+")[...] = 1
    assert sorted(os.listdir(tmp_path)) == ["v2.zarr", "v3.zarr"]
    assert _files(p3) == ["zarr.json"] and _files(p2) == [".zarray"]


@pytest.mark.parametrize("names", [["x"], ["x", "y", "z"], "xy", [1, 2], {"a": 1}])
def test_dimension_names_of_the_wrong_kind_refused(tmp_path, names):
    path = _raw_array(tmp_path, _v3_doc((4, 4), (2, 2), [B], dimension_names=names))
    with pytest.raises(MetadataError, match="dimension_names"):
        cs.open_array(path, mode="r")


# =========================================================================================
# 4. Memory and time far beyond the declared chunk
# =========================================================================================
def test_huge_grid_info_and_counts_are_cheap(tmp_path):
    """shape [2**31, 2**31], chunk [1, 1]: nchunks, nbytes, info, nbytes_stored and a
    point write/read cost nothing like the grid."""
    path = _raw_array(tmp_path, _v3_doc((2**31, 2**31), (1, 1), [B], dtype="uint8"))
    out = _child(f"""
        import resource, chunkstore as cs
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        a = cs.open_array({path!r}, mode="r+")
        assert a.nchunks == 2**62 and a.nbytes == 2**62 and a.size == 2**62
        assert a.nchunks_initialized == 0
        a[5, 7] = 3
        assert a[5, 5:9].tolist() == [0, 0, 3, 0]
        assert a.nchunks_initialized == 1
        info = str(a.info)
        assert "(2147483648, 2147483648)" in info, info
        print("ok", int(a.nbytes_stored) > 0)
    """)
    assert out == "ok True"


@pytest.mark.parametrize("shape, new", [((1_000_000,), (1,)),
                                        ((2**31, 2**31), (2**31 - 1, 2**31))],
                         ids=["1e6-chunks", "2**62-chunks"])
def test_resize_of_a_sparse_grid_is_bounded(tmp_path, shape, new):
    """An array of chunk length 1 with a single stored chunk. Observed: shrinking the
    1-MB uint8 array of 10**6 chunks to 1 element takes ~10 s and ~340 MB (4*10**6
    chunks: ~40 s, 1.4 GB), because ``io/resize.py`` ``clear_outside`` builds
    ``[layout.unit_key(u) for u in layout.units_outside(new_shape)]`` over the whole
    old grid and passes it to ``delete_many``; the 2**62-chunk grid never finishes.
    Expected: delete only what is stored (list the prefix), in bounded time/memory."""
    path = _raw_array(tmp_path, _v3_doc(shape, (1,) * len(shape), [B], dtype="uint8"))
    last = tuple(s - 1 for s in shape)
    out = _child(f"""
        import resource, chunkstore as cs
        a = cs.open_array({path!r}, mode="r+")
        a[{last!r}] = 7
        a[(0,) * a.ndim] = 5
        r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        a.resize(*{new!r})
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0) // 1024
        b = cs.open_array({path!r}, mode="r")
        print("ok" if b.shape == {new!r} and b[(0,) * b.ndim] == 5 and b.nchunks_initialized == 1
              and grew < 64 else f"bad {{b.shape}} {{grew}} MB")
    """)
    assert out == "ok"


def test_shard_with_billions_of_inner_chunks_refused_clearly(tmp_path):
    """chunk_grid [65536, 65536] uint8 (a 4 GiB shard, within the metadata limits) with
    inner chunks [1, 1]. Observed: the first read raises ``MemoryError: Unable to
    allocate 64.0 GiB for an array with shape (65536, 65536, 2)`` from
    ``codecs/sharding.py`` ``ShardingCodec.resolve`` -> ``empty_index()`` (used only to
    measure ``index_nbytes``); without an address-space cap the process tries to commit
    64 GiB. Expected: a chunkstore error naming zarr.json (index size checked against
    the limits like the chunk size), or a bounded answer."""
    path = _raw_array(tmp_path, _v3_doc(
        (65536, 65536), (65536, 65536),
        [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1, 1], "codecs": [B], "index_codecs": [B, {"name": "crc32c"}]}}],
        dtype="uint8"))
    out = _child(f"""
        import resource, chunkstore as cs
        with open("/proc/self/status") as f:
            vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize")][0]
        resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))
        try:
            a = cs.open_array({path!r}, mode="r")
            print("ok", a[0, :4].tolist())
        except cs.errors.ChunkstoreError as e:
            print("clear", "zarr.json" in str(e))
        except MemoryError as e:
            print("MemoryError")
    """, cpu=20)
    assert out in ("clear True", "ok [0, 0, 0, 0]")
