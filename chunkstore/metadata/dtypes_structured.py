"""Structured (record) data types and raw bytes: packed as stored, and their v2 / v3 JSON
forms (see the table in ``dtypes_extra``).

v3 names a record type ``struct`` (zarr-extensions; zarr-python >= 3.2 writes it), its
fields ``{"name": ..., "data_type": ...}`` objects and its fill value an object of one
value per field. The legacy ``structured`` (fields ``[name, type]``, fill value base64 of
the little-endian bytes) is read, and kept when an array that has it is rewritten."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata.dtypes_kinds import (
    MAX_ITEMSIZE,
    NUMPY_DTYPE_ERRORS,
    check_extra_dtype,
    config_value,
)

#: the kinds a field of a structured dtype may have (no object or variable-length fields;
#: ``V`` is a nested record or raw bytes)
FIELD_KINDS = "biufcSUMmV"
#: the v3 name written, and the legacy one read
STRUCT_NAME, LEGACY_STRUCT_NAME = "struct", "structured"


def packed_structured(dtype: np.dtype, where: str) -> np.dtype:
    """A structured dtype as it is stored: its fields in order with no padding (what the
    metadata can describe); a raw-bytes dtype (``V5``, no fields) as it is. Refuses
    sub-array and object fields."""
    if dtype.kind != "V":
        raise UnsupportedError(f"{where}: data type {dtype!r} is not a record or raw bytes")
    if dtype.subdtype is not None:
        raise UnsupportedError(f"{where}: sub-array data type {dtype!r} is not supported")
    if dtype.names is None:
        check_extra_dtype(dtype, where)  # no V0
        return dtype
    if not dtype.names:
        raise UnsupportedError(f"{where}: a structured dtype needs at least one field")
    fields = []
    for name in dtype.names:
        field_dtype = dtype.fields[name][0]
        if field_dtype.subdtype is not None:
            raise UnsupportedError(f"{where}: field {name!r} of {dtype!r} is a sub-array "
                                   f"({field_dtype}); zarr-python cannot store those")
        if field_dtype.kind not in FIELD_KINDS:
            raise UnsupportedError(f"{where}: field {name!r} of {dtype!r} has type "
                                   f"{field_dtype}, which a structured Zarr dtype cannot hold")
        if field_dtype.kind == "V":
            field_dtype = packed_structured(field_dtype, where)
        elif field_dtype.kind in "SUMm":
            check_extra_dtype(field_dtype, where)
        fields.append((name, field_dtype))
    return np.dtype(fields)


def is_structured(dtype: np.dtype) -> bool:
    """A record dtype (with named fields; raw bytes are not)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "V" and dtype.names is not None


def _field_entries(spec: Any, where: str) -> list[tuple[str, Any]]:
    """``(name, type)`` of each field of a record dtype's JSON, checked: v3 ``struct``
    fields ``{"name": ..., "data_type": ...}``, legacy and v2 fields ``[name, type]``."""
    if not isinstance(spec, list) or not spec:
        raise MetadataError(f"{where}: structured dtype fields must be a non-empty list, "
                            f"got {spec!r}")
    out = []
    for entry in spec:
        if isinstance(entry, dict):
            if set(entry) != {"name", "data_type"} or not isinstance(entry["name"], str):
                raise MetadataError(f"{where}: struct field {entry!r} must be an object of "
                                    "exactly 'name' (a string) and 'data_type'")
            out.append((entry["name"], entry["data_type"]))
            continue
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
        if field_dtype.kind not in FIELD_KINDS or field_dtype.itemsize == 0:
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
        if isinstance(field_spec, list):  # a nested record
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
        out.append([name, structured_to_v2(field_dtype, field_str)
                    if is_structured(field_dtype) else field_str(field_dtype)])
    return out


def structured_from_v3(data_type: dict[str, Any], where: str, parse_field: Any) -> np.dtype:
    """A v3 ``struct`` (or legacy ``structured``) data type; its fields are stored
    little-endian (``parse_field`` parses one field's ``data_type``)."""
    config = data_type.get("configuration")
    if isinstance(config, dict) and set(config) - {"fields"}:
        raise MetadataError(f"{where}: field 'data_type': {data_type.get('name')!r} has "
                            f"unknown configuration key(s) {sorted(set(config) - {'fields'})}")
    spec = config_value(data_type, "fields", where)
    fields = [(name, parse_field(field_spec, where))
              for name, field_spec in _field_entries(spec, where)]
    return structured_dtype(fields, where).newbyteorder("<")


def structured_to_v3(dtype: np.dtype, field_name: Any, legacy: bool = False) -> dict[str, Any]:
    """The v3 ``data_type`` of a record dtype: ``struct`` with field objects, or with
    ``legacy`` the ``structured`` form with ``[name, type]`` fields (``field_name`` names
    one field's type)."""
    if legacy:
        return {"name": LEGACY_STRUCT_NAME, "configuration": {"fields": [
            [name, field_name(dtype.fields[name][0])] for name in dtype.names]}}
    return {"name": STRUCT_NAME, "configuration": {"fields": [
        {"name": name, "data_type": field_name(dtype.fields[name][0])}
        for name in dtype.names]}}


def raw_bytes_from_v3(data_type: dict[str, Any], where: str) -> np.dtype:
    """A v3 ``{"name": "raw_bytes", "configuration": {"length_bytes": n}}`` as ``Vn``."""
    length = config_value(data_type, "length_bytes", where)
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_ITEMSIZE:
        raise MetadataError(f"{where}: field 'data_type': bad length_bytes {length!r} for "
                            f"raw_bytes (1..{MAX_ITEMSIZE})")
    return np.dtype(f"V{length}")


def raw_bytes_to_v3(dtype: np.dtype) -> dict[str, Any]:
    """The v3 ``data_type`` of raw bytes (``V5``)."""
    return {"name": "raw_bytes", "configuration": {"length_bytes": dtype.itemsize}}


# -- fill values: one JSON value per field ----------------------------------------------
def struct_fill_from_json(value: dict[str, Any], dtype: np.dtype, where: str,
                          parse_field: Callable[[Any, np.dtype, str], Any]) -> np.void:
    """A record fill value from ``{field: value}`` (every field, no other key); each value
    is parsed by ``parse_field(value, field_dtype, where)``."""
    names = list(dtype.names)
    missing = [n for n in names if n not in value]
    unknown = [k for k in value if k not in dtype.names]
    if missing or unknown:
        raise MetadataError(f"{where}: field 'fill_value': a struct fill value needs one "
                            f"entry per field {names}; missing {missing}, unknown {unknown}")
    out = np.zeros((), dtype=dtype)
    for name in names:
        out[name] = parse_field(value[name], dtype.fields[name][0],
                                f"{where} (struct field {name!r})")
    return out[()]


def struct_fill_to_json(value: Any, dtype: np.dtype,
                        field_json: Callable[[Any, np.dtype], Any]) -> dict[str, Any]:
    """``{field: value}`` of a record fill value, each value encoded by ``field_json``."""
    record = np.array(value, dtype=dtype)
    return {name: field_json(record[name][()], dtype.fields[name][0]) for name in dtype.names}
