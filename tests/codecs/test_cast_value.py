"""The ``cast_value`` and ``scale_offset`` codecs against an exact reference: every cast
worked out in rational arithmetic (``fractions``), every rounding mode and out-of-range
rule of the zarr-extensions spec, and the codecs' JSON, fill values and errors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from chunkstore.codecs import CastValueCodec, ChunkSpec, CodecPipeline, ScaleOffsetCodec
from chunkstore.codecs.registry import codec_from_json
from chunkstore.codecs.value_cast import NUMERIC_NAMES, ROUNDINGS, cast_values
from chunkstore.errors import CodecError, UnsupportedError

FLOATS = {"float16": (11, -14, 15), "float32": (24, -126, 127), "float64": (53, -1022, 1023)}


class Refused(Exception):
    """The reference's "no conversion" (the codec must raise CodecError)."""


def _round(q: Fraction, mode: str) -> int:
    lo = math.floor(q)
    frac = q - lo
    if frac == 0:
        return lo
    if mode == "towards-negative":
        return lo
    if mode == "towards-positive":
        return lo + 1
    if mode == "towards-zero":
        return lo + 1 if q < 0 else lo
    if frac != Fraction(1, 2):
        return lo + 1 if frac > Fraction(1, 2) else lo
    if mode == "nearest-even":
        return lo if lo % 2 == 0 else lo + 1
    return lo if q < 0 else lo + 1  # nearest-away


def reference(x, target: np.dtype, mode: str, oor: str | None):
    """One value cast exactly by the spec's rules (no scalar map)."""
    if target.kind in "iu":
        if isinstance(x, float) and not math.isfinite(x):
            raise Refused
        r = _round(Fraction(x), mode)
        info = np.iinfo(target)
        if info.min <= r <= int(info.max):
            return target.type(r)
        if oor == "clamp":
            return target.type(info.min if r < 0 else info.max)
        if oor == "wrap":
            bits = 8 * target.itemsize
            r %= 2 ** bits
            if target.kind == "i" and r >= 2 ** (bits - 1):
                r -= 2 ** bits
            return target.type(r)
        raise Refused
    if isinstance(x, float) and not math.isfinite(x):
        return np.array(x, target)[()]
    p, emin, emax = FLOATS[target.name]
    q = Fraction(x)
    negative = q < 0 or (q == 0 and math.copysign(1.0, float(x)) < 0)
    if q == 0:
        return np.array(-0.0 if negative else 0.0, target)[()]
    e = max(emin, math.floor(math.log2(abs(q))))
    while 2 ** e > abs(q) and e > emin:  # log2 of a huge rational may be off by one
        e -= 1
    while 2 ** (e + 1) <= abs(q):
        e += 1
    ulp = Fraction(2) ** (e - p + 1)
    r = _round(q / ulp, mode) * ulp
    if abs(r) >= Fraction(2) ** (emax + 1):
        if oor == "clamp":
            return np.array(-np.inf if negative else np.inf, target)[()]
        raise Refused
    value = float(r)  # exact: r is a value of target, hence of float64
    if value == 0:
        value = -0.0 if negative else 0.0
    return np.array(value, target)[()]


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":  # NaN as NaN (no payload required), zeros with their sign
        nan = np.isnan(a)
        return bool((nan == np.isnan(b)).all() and (a[~nan].tobytes() == b[~nan].tobytes()))
    return a.tobytes() == b.tobytes()


def check_against_reference(values: np.ndarray, target: np.dtype, mode: str, oor):
    expected, refused = [], False
    for v in values.tolist():
        try:
            expected.append(reference(v, target, mode, oor))
        except Refused:
            refused = True
    if refused:
        with pytest.raises(CodecError, match="cannot cast"):
            cast_values(values, target, mode, oor)
        return
    got = cast_values(values, target, mode, oor)
    want = np.array(expected, dtype=target).reshape(values.shape)
    assert same(got, want), (values, got, want)


def _edges(dtype: np.dtype) -> list:
    """Values at the edges of every type: bounds, ties, the float gaps."""
    out = [0, 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 127.5, 128, -129, 255.5, 256, 32767.5,
           32768, -32769, 65504, 65519.99, 65520, 65536, 2.0 ** 31 - 0.5, 2.0 ** 31,
           2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 24 + 1, 2.0 ** 53 + 2,
           3.4028234e38, 3.4028235e38 * 1.0000001, 2.0 ** 128, 1e-40, -1e-46, 1e-310,
           6e-8, 3e-8, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 16777217, 2 ** 62 + 2 ** 38,
           1.5 * 2.0 ** 63, -1.5 * 2.0 ** 63, -(2.0 ** 70) - 2.0 ** 63 * 1.25]
    if dtype.kind == "f":
        out += [math.nan, math.inf, -math.inf, -0.0, 1.0000001, 0.1]
    kept = []
    for v in out:
        with np.errstate(all="ignore"):
            try:
                a = np.array(v, dtype)
            except OverflowError:
                continue
        if dtype.kind in "iu" and (not float(v).is_integer() or int(a) != v):
            continue
        if dtype.kind == "f" and math.isfinite(float(a)) != math.isfinite(v):
            continue
        kept.append(a[()])
    return kept


@pytest.mark.parametrize("source", NUMERIC_NAMES)
def test_edges_match_the_exact_reference(source):
    src = np.dtype(source)
    values = np.array(_edges(src), src)
    for target in NUMERIC_NAMES:
        dst = np.dtype(target)
        for mode in ROUNDINGS:
            for oor in [None, "clamp"] + (["wrap"] if dst.kind in "iu" else []):
                # those the reference converts all together, each refused one alone (one
                # refused value refuses a whole chunk)
                ok, want = [], []
                for v in values:
                    try:
                        want.append(reference(v.item(), dst, mode, oor))
                        ok.append(v)
                    except Refused:
                        with pytest.raises(CodecError, match="cannot cast"):
                            cast_values(np.array([v], src), dst, mode, oor)
                got = cast_values(np.array(ok, src), dst, mode, oor)
                assert same(got, np.array(want, dst)), (source, target, mode, oor, ok, got,
                                                        want)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), source=st.sampled_from(NUMERIC_NAMES),
       target=st.sampled_from(NUMERIC_NAMES), mode=st.sampled_from(ROUNDINGS),
       oor=st.sampled_from([None, "clamp", "wrap"]))
def test_random_values_match_the_exact_reference(data, source, target, mode, oor):
    src, dst = np.dtype(source), np.dtype(target)
    if oor == "wrap" and dst.kind == "f":
        oor = "clamp"
    values = data.draw(hnp.arrays(src, st.integers(1, 12)))
    check_against_reference(values, dst, mode, oor)


def test_scalar_map_first_entry_wins_and_nan_matches_nan():
    codec = CastValueCodec("int16", scalar_map={"encode": [["NaN", -32768], [1.5, 7],
                                                           [1.5, 9]],
                                                "decode": [[-32768, "NaN"]]})
    codec = codec.resolve(ChunkSpec((4,), np.dtype("f8")))
    enc = codec.encode(np.array([np.nan, 1.5, 2.5, -0.0]))
    assert enc.tolist() == [-32768, 7, 2, 0]
    dec = codec.decode(enc, ChunkSpec((4,), np.dtype("f8")))
    assert np.isnan(dec[0]) and dec[1:].tolist() == [7.0, 2.0, 0.0]


def test_unmapped_nan_to_integer_is_refused_with_the_value():
    codec = CastValueCodec("uint8", out_of_range="clamp").resolve(
        ChunkSpec((2,), np.dtype("f4")))
    with pytest.raises(CodecError, match="nan.*uint8.*scalar_map"):
        codec.encode(np.array([1, np.nan], "f4"))


def test_json_as_written_and_unknown_keys_refused():
    entry = {"name": "cast_value", "configuration": {"data_type": "int16",
                                                     "out_of_range": "clamp"}}
    assert codec_from_json(entry, "a").to_json() == entry
    with pytest.raises(CodecError, match="unknown configuration key"):
        codec_from_json({"name": "cast_value", "configuration": {"data_type": "int8",
                                                                 "extra": 1}}, "a")
    with pytest.raises(CodecError, match="needs 'data_type'"):
        codec_from_json({"name": "cast_value"}, "a")
    with pytest.raises(CodecError, match="wrap"):
        CastValueCodec("float32", out_of_range="wrap")
    with pytest.raises(CodecError, match="rounding"):
        CastValueCodec("int8", rounding="up")
    with pytest.raises(UnsupportedError, match="bfloat16"):
        CastValueCodec("bfloat16")
    with pytest.raises(CodecError, match="complex64"):
        CastValueCodec("int8").resolve(ChunkSpec((1,), np.dtype("c8")))
    with pytest.raises(CodecError, match="scalar_map encode value: 300 is not a int8"):
        CastValueCodec("int8", scalar_map={"encode": [["NaN", 300]]}).resolve(
            ChunkSpec((1,), np.dtype("f8")))
    for key in ("0x7ff8", "Inf", 10**400, True, [1]):
        with pytest.raises(CodecError, match="scalar_map encode key"):
            CastValueCodec("int8", scalar_map={"encode": [[key, 1]]}).resolve(
                ChunkSpec((1,), np.dtype("f8")))
    smap = {"encode": [["0x7ff8000000000001", 1], ["+Infinity", 2], [1e300, 3]]}
    c = CastValueCodec("int8", scalar_map=smap).resolve(ChunkSpec((3,), np.dtype("f8")))
    assert c.encode(np.array([np.nan, np.inf, 1e300])).tolist() == [1, 2, 3]
    with pytest.raises(CodecError, match="scale_offset': scale: 1e\\+300 is not a float32"):
        ScaleOffsetCodec(scale=1e300).resolve(ChunkSpec((1,), np.dtype("f4")))


def test_fill_value_goes_through_the_chain():
    chain = [ScaleOffsetCodec(offset=-10, scale=0.1),
             CastValueCodec("uint8", scalar_map={"encode": [["NaN", 0]],
                                                 "decode": [[0, "NaN"]]})]
    pipe = CodecPipeline([*chain, codec_from_json({"name": "bytes"}, "a")],
                         ChunkSpec((3,), np.dtype("f8"), np.nan))
    assert pipe._bytes_spec.fill_value == 0 and pipe._bytes_spec.dtype == np.uint8
    pipe = CodecPipeline([*chain, codec_from_json({"name": "bytes"}, "a")],
                         ChunkSpec((3,), np.dtype("f8"), 5.0))
    assert pipe._bytes_spec.fill_value == 2  # (5 + 10) * 0.1 = 1.5 -> 2 (ties to even)
    with pytest.raises(CodecError, match="fill value.*uint8"):  # no value for NaN
        CodecPipeline([CastValueCodec("uint8"), codec_from_json({"name": "bytes"}, "a")],
                      ChunkSpec((3,), np.dtype("f8"), np.nan), "array '/x'")


# -- scale_offset ----------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(NUMERIC_NAMES))
def test_scale_offset_integers_exact_or_refused(data, name):
    dtype = np.dtype(name)
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:
        values = data.draw(hnp.arrays(dtype, st.integers(1, 8)))
        offset = data.draw(st.floats(-100, 100, width=8 * dtype.itemsize))
        scale = data.draw(st.floats(0.125, 8, width=8 * dtype.itemsize))
        codec = ScaleOffsetCodec(float(offset), float(scale)).resolve(
            ChunkSpec(values.shape, dtype))
        with np.errstate(all="ignore"):  # step by step, in the type's own arithmetic
            want = (values - dtype.type(offset)) * dtype.type(scale)
            back = want / dtype.type(scale) + dtype.type(offset)
        assert same(codec.encode(values), want)
        assert same(codec.decode(want, ChunkSpec(values.shape, dtype)), back)
        return
    values = data.draw(hnp.arrays(dtype, st.integers(1, 8)))
    offset = data.draw(st.integers(int(info.min), int(info.max)))
    scale = data.draw(st.integers(int(info.min), int(info.max)).filter(bool))
    codec = ScaleOffsetCodec(offset, scale).resolve(ChunkSpec(values.shape, dtype))
    exact = [(int(v) - offset) * scale for v in values.tolist()]
    steps_fit = all(info.min <= int(v) - offset <= info.max for v in values.tolist())
    if steps_fit and all(info.min <= e <= info.max for e in exact):
        enc = codec.encode(values)
        assert enc.dtype == dtype and enc.tolist() == exact
        assert codec.decode(enc, ChunkSpec(values.shape, dtype)).tolist() == values.tolist()
    else:
        with pytest.raises(CodecError, match="leaves the range"):
            codec.encode(values)
    # decoding: whole quotients only, and the sum inside the type
    stored = data.draw(hnp.arrays(dtype, values.shape))
    quotients = [Fraction(int(v), scale) for v in stored.tolist()]
    sums = [q + offset for q in quotients]
    if all(q.denominator == 1 and info.min <= q <= info.max and info.min <= s <= info.max
           for q, s in zip(quotients, sums, strict=True)):
        assert codec.decode(stored, ChunkSpec(values.shape, dtype)).tolist() == [
            int(s) for s in sums]
    else:
        with pytest.raises(CodecError):
            codec.decode(stored, ChunkSpec(values.shape, dtype))


def test_scale_offset_json_and_validation():
    assert ScaleOffsetCodec().to_json() == {"name": "scale_offset"}
    entry = {"name": "scale_offset", "configuration": {"offset": 5, "scale": 0.1}}
    assert codec_from_json(entry, "a").to_json() == entry
    assert codec_from_json({"name": "scale_offset"}, "a").resolve(
        ChunkSpec((2,), np.dtype("i4"))).encode(np.array([3, 4], "i4")).tolist() == [3, 4]
    with pytest.raises(CodecError, match="unknown configuration key"):
        codec_from_json({"name": "scale_offset", "configuration": {"astype": "u1"}}, "a")
    with pytest.raises(CodecError, match="zero"):
        ScaleOffsetCodec(scale=0).resolve(ChunkSpec((1,), np.dtype("f4")))
    with pytest.raises(CodecError, match="offset: 0.5 is not a int32"):
        ScaleOffsetCodec(offset=0.5).resolve(ChunkSpec((1,), np.dtype("i4")))
    with pytest.raises(CodecError, match="offset: -1 is not a uint8"):
        ScaleOffsetCodec(offset=-1).resolve(ChunkSpec((1,), np.dtype("u1")))
    with pytest.raises(CodecError, match="bool"):
        ScaleOffsetCodec(scale=2).resolve(ChunkSpec((1,), np.dtype("?")))
    # float32 arithmetic stays float32 (never promoted to float64)
    c = ScaleOffsetCodec(offset=0.1, scale=3).resolve(ChunkSpec((1,), np.dtype("f4")))
    out = c.encode(np.array([1.0], "f4"))
    assert out.dtype == np.float32
    assert out.tobytes() == ((np.float32(1.0) - np.float32(0.1)) * np.float32(3)).tobytes()


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.sampled_from([0.0, -0.0, 1.5, 2.0, -3.0, math.nan, 1e300]),
                     max_size=6),
       values=st.lists(st.sampled_from([0.0, -0.0, 1.5, 2.0, -3.0, math.nan, 7.0]),
                       min_size=1, max_size=10))
def test_scalar_map_matches_a_loop_over_its_entries(keys, values):
    """The first entry whose key equals the value (NaN matching NaN) gives the result."""
    entries = [[("NaN" if math.isnan(k) else k), i] for i, k in enumerate(keys)]
    codec = CastValueCodec("int8", out_of_range="clamp",
                           scalar_map={"encode": entries}).resolve(
        ChunkSpec((len(values),), np.dtype("f8")))
    want = []
    for v in values:
        hit = next((i for i, k in enumerate(keys)
                    if k == v or (math.isnan(k) and math.isnan(v))), None)
        want.append(hit if hit is not None else None)
    if any(w is None and math.isnan(v) for w, v in zip(want, values, strict=True)):
        with pytest.raises(CodecError):
            codec.encode(np.array(values))
        return
    got = codec.encode(np.array(values)).tolist()
    assert got == [w if w is not None else int(np.rint(v)) for w, v in
                   zip(want, values, strict=True)]


def test_a_scalar_map_of_many_entries_costs_a_lookup_per_element():
    n = 20_000  # a pass per entry: 4e8 comparisons; a lookup per element: milliseconds
    smap = {"encode": [[i, i % 100] for i in range(n)]}
    codec = CastValueCodec("int8", scalar_map=smap).resolve(ChunkSpec((n,), np.dtype("i4")))
    values = np.arange(n, dtype="i4")[::-1].copy()
    assert (codec.encode(values) == (values % 100).astype("i1")).all()
