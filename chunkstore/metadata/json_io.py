"""Strict JSON decoding and encoding of metadata documents."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..errors import MetadataError


def _reject_constant(name: str) -> Any:
    raise ValueError(f"bare {name} is not valid JSON")


def load_json(raw: bytes, where: str) -> dict[str, Any]:
    """Parse a metadata document; any malformation raises MetadataError naming it."""
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"{where}: malformed JSON: {e}") from e
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} {obj!r} is not JSON serializable")


def dump_json(doc: dict[str, Any], where: str = "metadata") -> bytes:
    """Serialize a document (2-space indent, no bare NaN/Infinity)."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False, default=_default).encode()
    except (TypeError, ValueError) as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e


class JSONTypeError(MetadataError, TypeError):
    """A value of a type JSON cannot hold (a TypeError, as ``json.dumps`` and zarr-python
    raise, and a MetadataError naming the node)."""


def check_json_value(value: Any, where: str) -> Any:
    """Validate that a user value (attributes) is plain JSON; return it normalized.

    A value of a non-JSON type raises JSONTypeError (a TypeError); NaN or infinity, which
    strict JSON cannot hold, raise MetadataError (a ValueError)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False, default=_default))
    except TypeError as e:
        raise JSONTypeError(f"{where}: value is not JSON-serializable: {e}") from e
    except ValueError as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e


def require(doc: dict[str, Any], field: str, types: type | tuple[type, ...], where: str) -> Any:
    """``doc[field]`` checked against ``types``; errors name the document and field."""
    if field not in doc:
        raise MetadataError(f"{where}: missing required field {field!r}")
    value = doc[field]
    bool_ok = object in _as_tuple(types) or bool in _as_tuple(types)
    if not isinstance(value, types) or (isinstance(value, bool) and not bool_ok):
        raise MetadataError(f"{where}: field {field!r} has invalid value {value!r}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def shape_tuple(value: Any, field: str, where: str, *, positive: bool = False) -> tuple[int, ...]:
    """A shape-like JSON list as a tuple of non-negative (or positive) ints."""
    if not isinstance(value, list | tuple):
        raise MetadataError(f"{where}: field {field!r} must be a list of integers, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if positive else 0):
            raise MetadataError(f"{where}: field {field!r} has invalid entry {v!r}")
        out.append(int(v))
    return tuple(out)
