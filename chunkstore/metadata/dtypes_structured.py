"""Structured (record) data types: packed as stored, and their v2 / v3 JSON forms (see
the table in ``dtypes_extra``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import MetadataError, UnsupportedError
from .dtypes_kinds import MAX_ITEMSIZE, NUMPY_DTYPE_ERRORS, check_extra_dtype, config_value

#: the kinds a field of a structured dtype may have (no object, string or void-bytes fields)
FIELD_KINDS = "biufcSUMmV"


def packed_structured(dtype: np.dtype, where: str) -> np.dtype:
    """A structured dtype as it is stored: its fields in order with no padding (what the
    metadata can describe); refuses plain void, sub-array and object fields."""
    if dtype.kind != "V" or dtype.names is None:
        raise UnsupportedError(f"{where}: data type {dtype!r} is raw void bytes without "
                               "fields; give a structured dtype, e.g. [('a', '<i4')]")
    if dtype.subdtype is not None:
        raise UnsupportedError(f"{where}: sub-array data type {dtype!r} is not supported")
    if not dtype.names:
        raise UnsupportedError(f"{where}: a structured dtype needs at least one field")
    fields = []
    for name in dtype.names:
        field_dtype = dtype.fields[name][0]
        if field_dtype.subdtype is not None:
            raise UnsupportedError(f"{where}: field {name!r} of {dtype!r} is a sub-array "
                                   f"({field_dtype}); zarr-python cannot store those")
        if field_dtype.kind not in FIELD_KINDS or (field_dtype.kind == "V"
                                                   and field_dtype.names is None):
            raise UnsupportedError(f"{where}: field {name!r} of {dtype!r} has type "
                                   f"{field_dtype}, which a structured Zarr dtype cannot hold")
        if field_dtype.kind == "V":
            field_dtype = packed_structured(field_dtype, where)
        elif field_dtype.kind in "SUMm":
            check_extra_dtype(field_dtype, where)
        fields.append((name, field_dtype))
    return np.dtype(fields)


def is_structured(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "V"


def _field_entries(spec: Any, where: str) -> list[tuple[str, Any]]:
    """``[[name, type], ...]`` of a structured dtype's JSON, checked."""
    if not isinstance(spec, list) or not spec:
        raise MetadataError(f"{where}: structured dtype fields must be a non-empty list of "
                            f"[name, type] pairs, got {spec!r}")
    out = []
    for entry in spec:
        if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
            raise MetadataError(f"{where}: structured dtype field {entry!r} must be "
                                "[name, type]")
        if len(entry) == 3:
            raise UnsupportedError(f"{where}: structured dtype field {entry[0]!r} is a "
                                   f"sub-array (shape {entry[2]!r}); not supported")
        if len(entry) != 2:
            raise MetadataError(f"{where}: structured dtype field {entry!r} must be "
                                "[name, type]")
        out.append((entry[0], entry[1]))
    return out


def structured_dtype(fields: list[tuple[str, np.dtype]], where: str) -> np.dtype:
    """NumPy's dtype of ``(name, dtype)`` fields; duplicate or empty names refused."""
    names = [n for n, _ in fields]
    if len(set(names)) != len(names) or not all(names):
        raise MetadataError(f"{where}: structured dtype field names must be distinct and "
                            f"non-empty, got {names!r}")
    for name, field_dtype in fields:
        if field_dtype.kind not in FIELD_KINDS or (field_dtype.kind == "V"
                                                   and field_dtype.names is None):
            raise UnsupportedError(f"{where}: structured dtype field {name!r} has type "
                                   f"{field_dtype}, which a structured Zarr dtype cannot hold")
    try:
        dtype = np.dtype(fields)
    except NUMPY_DTYPE_ERRORS as e:
        raise MetadataError(f"{where}: NumPy cannot build structured dtype {fields!r}: "
                            f"{e}") from e
    if dtype.itemsize > MAX_ITEMSIZE:
        raise MetadataError(f"{where}: structured dtype of {dtype.itemsize} bytes is more "
                            f"than the {MAX_ITEMSIZE} NumPy supports")
    return dtype


def structured_from_v2(spec: Any, where: str, parse_field: Any) -> np.dtype:
    """A v2 ``[["a", "<i4"], ["b", [["x", "<f4"]]]]`` (``parse_field`` parses the
    string of one field's type)."""
    fields = []
    for name, field_spec in _field_entries(spec, where):
        if isinstance(field_spec, list):
            fields.append((name, structured_from_v2(field_spec, where, parse_field)))
        elif isinstance(field_spec, str):
            fields.append((name, parse_field(field_spec, where)))
        else:
            raise MetadataError(f"{where}: structured dtype field {name!r} has invalid type "
                                f"{field_spec!r}")
    return structured_dtype(fields, where)


def structured_to_v2(dtype: np.dtype, field_str: Any) -> list[list[Any]]:
    """The v2 ``dtype`` of a structured dtype: ``[[name, "<i4"], ...]`` (nested lists for
    nested structures)."""
    out: list[list[Any]] = []
    for name in dtype.names:
        field_dtype = dtype.fields[name][0]
        out.append([name, structured_to_v2(field_dtype, field_str) if field_dtype.kind == "V"
                    else field_str(field_dtype)])
    return out


def structured_from_v3(data_type: dict[str, Any], where: str, parse_field: Any) -> np.dtype:
    """A v3 ``{"name": "structured", "configuration": {"fields": [[name, type], ...]}}``;
    fields are stored little-endian (``parse_field`` parses one field's ``data_type``)."""
    spec = config_value(data_type, "fields", where)
    fields = [(name, parse_field(field_spec, where))
              for name, field_spec in _field_entries(spec, where)]
    return structured_dtype(fields, where).newbyteorder("<")


def structured_to_v3(dtype: np.dtype, field_name: Any) -> dict[str, Any]:
    """The v3 ``data_type`` of a structured dtype (``field_name`` names one field's type)."""
    return {"name": "structured", "configuration": {"fields": [
        [name, field_name(dtype.fields[name][0])] for name in dtype.names]}}
