"""Data types and fill values: v3 names, v2 type strings, fill values as the specs encode them."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata.dtypes import (
    default_fill_value,
    dtype_from_v2,
    dtype_from_v3,
    fill_equal,
    fill_value_to_json,
    normalize_fill_value,
    parse_fill_value,
    v2_str_of,
    v3_name_of,
)

V3_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64", "complex64", "complex128"]
MULTIBYTE = [n for n in V3_NAMES if np.dtype(n).itemsize > 1]
FLOATS = ["float16", "float32", "float64"]
WHERE = "x.zarr/zarr.json"


# -- data type names -------------------------------------------------------------------------
@pytest.mark.parametrize("name", V3_NAMES)
def test_v3_name_round_trip(name):
    dtype = dtype_from_v3(name, WHERE)
    assert dtype == np.dtype(name)
    assert v3_name_of(dtype) == name


@pytest.mark.parametrize("name", MULTIBYTE)
def test_v3_name_ignores_byte_order(name):
    big = np.dtype(name).newbyteorder(">")
    assert v3_name_of(big) == name


@pytest.mark.parametrize("name", V3_NAMES)
@pytest.mark.parametrize("order", ["<", ">"])
def test_v2_dtype_string_both_byte_orders(name, order):
    dtype = np.dtype(name)
    if dtype.itemsize == 1:
        s = dtype.str  # "|b1", "|i1", "|u1": no byte order for one-byte types
    else:
        s = order + dtype.str[1:]
    parsed = dtype_from_v2(s, ".zarray")
    assert parsed == np.dtype(s)
    assert v2_str_of(parsed) == s
    if dtype.itemsize > 1:
        assert parsed.byteorder in ("<", ">", "=")
        assert parsed.newbyteorder("<" if order == ">" else ">") != parsed


@pytest.mark.parametrize("bad", ["int128", "float8", "Int32", "", "string_but_no"])
def test_v3_unknown_data_type_names_field(bad):
    with pytest.raises(UnsupportedError, match=r"x\.zarr/zarr\.json.*data_type"):
        dtype_from_v3(bad, WHERE)


@pytest.mark.parametrize("bad", ["|V0", 7, [["a", "<i4", [2]]], [["a"]], [], [["a", "|O"]],
                                 [["a", "<i4"], ["a", "<f8"]], [[1, "<i4"]], [["a", 5]]])
def test_v2_unsupported_dtype_names_field(bad):
    """Empty raw bytes, sub-array, object and malformed structured fields are refused (a list of
    [name, type] fields is a structured dtype: tests/metadata/test_structured.py)."""
    with pytest.raises(MetadataError, match=r"x\.zarr/\.zarray.*dtype"):
        dtype_from_v2(bad, "x.zarr/.zarray")


@pytest.mark.parametrize("bad", ["<q99", "0:", "01", "<i4,<i4x", "(2)f"])
def test_v2_invalid_dtype_string(bad):
    with pytest.raises(MetadataError, match=r"\.zarray.*'dtype'"):
        dtype_from_v2(bad, ".zarray")


# -- fill values: encoding -------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize(("value", "json_value"), [
    (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
    (0.0, 0), (1.5, 1.5), (-2.0, -2)])
def test_float_fill_to_json(name, value, json_value):
    dtype = np.dtype(name)
    assert fill_value_to_json(dtype.type(value), dtype) == json_value


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("json_value", ["NaN", "Infinity", "-Infinity", 0, 1.5, -3])
def test_float_fill_round_trip(name, json_value):
    dtype = np.dtype(name)
    value = parse_fill_value(json_value, dtype, WHERE)
    assert isinstance(value, np.generic) and value.dtype == dtype
    assert fill_value_to_json(value, dtype) == json_value


def test_float_fill_negative_zero_kept():
    value = parse_fill_value(-0.0, np.dtype("f8"), WHERE)
    assert math.copysign(1, value) == -1


@pytest.mark.parametrize(("name", "hex_value", "expected_bits"), [
    ("float16", "0x7e00", 0x7E00),
    ("float32", "0x7fc00000", 0x7FC00000),
    ("float32", "0x7fc00001", 0x7FC00001),
    ("float64", "0x7ff8000000000000", 0x7FF8000000000000),
    ("float64", "0x7ff8000000000001", 0x7FF8000000000001),
    ("float32", "0x3fc00000", 0x3FC00000),  # 1.5
])
def test_hex_fill_on_read(name, hex_value, expected_bits):
    dtype = np.dtype(name)
    value = parse_fill_value(hex_value, dtype, WHERE)
    bits_dtype = {2: ">u2", 4: ">u4", 8: ">u8"}[dtype.itemsize]
    got = int(np.array(value, dtype=dtype.newbyteorder(">")).view(bits_dtype))
    assert got == expected_bits


def test_hex_fill_float32_value():
    assert parse_fill_value("0x3fc00000", np.dtype("f4"), WHERE) == 1.5
    assert math.isnan(parse_fill_value("0x7fc00000", np.dtype("f4"), WHERE))


def test_nondefault_nan_payload_written_as_hex():
    dtype = np.dtype("f4")
    raw = np.frombuffer(struct.pack("<I", 0x7FC00001), dtype="<f4")[0]
    assert fill_value_to_json(raw, dtype) == "0x7fc00001"
    assert fill_value_to_json(np.float32(np.nan), dtype) == "NaN"


@pytest.mark.parametrize(("name", "hex_value"), [
    ("float32", "0x7fc0"),              # 4 digits for a 4-byte type
    ("float32", "0x7fc0000000000000"),  # 16 digits
    ("float64", "0x7fc00000"),
    ("float16", "0x7fc00000"),
])
def test_hex_fill_width_checked(name, hex_value):
    with pytest.raises(MetadataError, match=r"x\.zarr/zarr\.json.*fill_value.*digits"):
        parse_fill_value(hex_value, np.dtype(name), WHERE)


def test_hex_fill_bad_digits():
    with pytest.raises(MetadataError, match="fill_value"):
        parse_fill_value("0xzzzzzzzz", np.dtype("f4"), WHERE)


@pytest.mark.parametrize("name", ["complex64", "complex128"])
@pytest.mark.parametrize("json_value", [[1.5, -2], ["NaN", 0], ["Infinity", "-Infinity"], [0, 0]])
def test_complex_fill_round_trip(name, json_value):
    dtype = np.dtype(name)
    value = parse_fill_value(json_value, dtype, WHERE)
    assert value.dtype == dtype
    assert fill_value_to_json(value, dtype) == json_value


@pytest.mark.parametrize("bad", [1.0, [1.0], [1, 2, 3], "NaN"])
def test_complex_fill_must_be_pair(bad):
    with pytest.raises(MetadataError, match="fill_value"):
        parse_fill_value(bad, np.dtype("c8"), WHERE)


@pytest.mark.parametrize("name", ["int8", "int16", "int32", "int64",
                                  "uint8", "uint16", "uint32", "uint64"])
def test_int_fill_extremes_round_trip(name):
    info = np.iinfo(name)
    dtype = np.dtype(name)
    for v in (int(info.min), int(info.max), 0):
        parsed = parse_fill_value(v, dtype, WHERE)
        assert parsed == v and parsed.dtype == dtype
        assert fill_value_to_json(parsed, dtype) == v
        assert type(fill_value_to_json(parsed, dtype)) is int


@pytest.mark.parametrize(("name", "bad"), [("uint8", 256), ("int8", -129), ("uint64", -1),
                                           ("int64", 2**63)])
def test_int_fill_out_of_range(name, bad):
    with pytest.raises(MetadataError, match=r"fill_value.*out of range"):
        parse_fill_value(bad, np.dtype(name), WHERE)


@pytest.mark.parametrize("bad", ["NaN", 1.5, True, [1]])
def test_int_fill_wrong_type(bad):
    with pytest.raises(MetadataError, match=r"x\.zarr/zarr\.json.*fill_value"):
        parse_fill_value(bad, np.dtype("i4"), WHERE)


def test_bool_fill():
    dtype = np.dtype(bool)
    assert parse_fill_value(True, dtype, WHERE) is np.True_
    assert fill_value_to_json(np.True_, dtype) is True
    assert fill_value_to_json(np.False_, dtype) is False
    with pytest.raises(MetadataError, match="fill_value"):
        parse_fill_value(2, dtype, WHERE)
    with pytest.raises(MetadataError, match="fill_value"):
        parse_fill_value("true", dtype, WHERE)


def test_null_fill():
    assert parse_fill_value(None, np.dtype("f8"), ".zarray", allow_none=True) is None
    assert fill_value_to_json(None, np.dtype("f8")) is None
    with pytest.raises(MetadataError, match=r"x\.zarr/zarr\.json.*fill_value"):
        parse_fill_value(None, np.dtype("f8"), WHERE)


@pytest.mark.parametrize("name", V3_NAMES)
def test_default_fill_is_zero(name):
    value = default_fill_value(np.dtype(name))
    assert value.dtype == np.dtype(name)
    assert value == 0


def test_normalize_fill_value():
    assert normalize_fill_value(3, np.dtype("u1")) == 3
    assert math.isnan(normalize_fill_value("nan", np.dtype("f4")))
    assert normalize_fill_value(1 + 2j, np.dtype("c16")) == 1 + 2j
    assert normalize_fill_value(None, np.dtype("f8")) is None
    with pytest.raises(MetadataError, match="fill_value"):
        normalize_fill_value([1, 2], np.dtype("f8"), "arr")
    with pytest.raises(MetadataError, match="not an integer"):
        normalize_fill_value(1.5, np.dtype("i4"), "arr")


def test_fill_equal():
    assert fill_equal(np.float32(np.nan), np.float32(np.nan))
    assert not fill_equal(np.float32(0.0), np.float32(-0.0))
    assert not fill_equal(np.float32(1), np.float64(1))
    assert fill_equal(None, None)
    assert not fill_equal(None, np.int8(0))


def test_complex_hex_parts():
    value = parse_fill_value(["0x7fc00001", "0x3f800000"], np.dtype("c8"), WHERE)
    assert value.imag == 1.0 and math.isnan(value.real)
    with pytest.raises(MetadataError, match="16 digits"):
        parse_fill_value(["0x7fc00001", 0], np.dtype("c16"), WHERE)
