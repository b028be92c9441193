"""Strict JSON decoding and encoding of metadata documents."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ..errors import MetadataError

#: the deepest nesting of arrays and objects a metadata document may have
MAX_JSON_DEPTH = 128
#: the deepest a user value (attributes) may nest: it sits two levels down in zarr.json
MAX_VALUE_DEPTH = MAX_JSON_DEPTH - 2
INT64_MAX = 2**63 - 1


def load_json(raw: bytes, where: str) -> dict[str, Any]:
    """Parse a metadata document; any malformation raises MetadataError naming it,
    including nesting deeper than ``MAX_JSON_DEPTH`` (which would otherwise exhaust the
    interpreter's recursion limit, here or in the code that walks the document)."""
    try:
        # bare NaN / Infinity are not JSON, but Python's json (so zarr-python) writes them
        # in attributes: read as floats, as zarr-python does
        doc = json.loads(raw)
    except RecursionError:
        field = _deep_field(raw)
        raise MetadataError(f"{where}: {_field_label(field)}nests JSON deeper than "
                            f"{MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"{where}: malformed JSON: {e}") from e
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    for key, value in doc.items():
        if _deeper_than(value, MAX_JSON_DEPTH - 1):
            raise MetadataError(f"{where}: {_field_label(key)}nests JSON deeper than "
                                f"{MAX_JSON_DEPTH} levels")
    return doc


def _field_label(field: str | None) -> str:
    return "" if field is None else f"field {field!r} "


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` levels (iteratively)."""
    if not isinstance(value, dict | list):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _deep_field(raw: bytes | str) -> str | None:
    """The top-level field under which ``raw`` nests deeper than MAX_JSON_DEPTH (a raw
    scan, for documents too deep for the JSON parser); None if not found."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
    depth, in_string, escaped, start = 0, False, False, 0
    last_string = field = None
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string, last_string = False, text[start:i]
        elif ch == '"':
            in_string, start = True, i + 1
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return field
        elif ch in "]}":
            depth -= 1
        elif ch == ":" and depth == 1:
            field = last_string
    return None


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} {obj!r} is not JSON serializable")


def dump_json(doc: dict[str, Any], where: str = "metadata") -> bytes:
    """Serialize a document (2-space indent). Values chunkstore makes never hold NaN or
    infinity (fill values spell them as strings, user values are refused); a bare NaN
    read from another writer's attributes is written back as it was."""
    try:
        return json.dumps(doc, indent=2, default=_default).encode()
    except (TypeError, ValueError) as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e


class JSONTypeError(MetadataError, TypeError):
    """A value of a type JSON cannot hold (a TypeError, as ``json.dumps`` and zarr-python
    raise, and a MetadataError naming the node)."""


def check_json_value(value: Any, where: str) -> Any:
    """Validate that a user value (attributes) is plain JSON; return it normalized.

    A value of a non-JSON type raises JSONTypeError (a TypeError); NaN or infinity, which
    strict JSON cannot hold, and nesting deeper than a document may have (readers refuse
    it: the node could never be opened again) raise MetadataError (a ValueError)."""
    try:
        normalized = json.loads(json.dumps(value, allow_nan=False, default=_default))
    except TypeError as e:
        raise JSONTypeError(f"{where}: value is not JSON-serializable: {e}") from e
    except (ValueError, RecursionError) as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e
    if _deeper_than(normalized, MAX_VALUE_DEPTH):
        raise MetadataError(f"{where}: value nests JSON deeper than {MAX_VALUE_DEPTH} "
                            "levels (readers refuse deeper documents)")
    return normalized


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
    """A shape-like JSON list as a tuple of non-negative (or positive) ints; each entry
    and their product must fit an int64."""
    if not isinstance(value, list | tuple):
        raise MetadataError(f"{where}: field {field!r} must be a list of integers, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if positive else 0):
            raise MetadataError(f"{where}: field {field!r} has invalid entry {v!r}")
        if v > INT64_MAX:
            raise MetadataError(f"{where}: field {field!r}: entry {v} does not fit an int64")
        out.append(int(v))
    if math.prod(out) > INT64_MAX:
        raise MetadataError(f"{where}: field {field!r}: {out} holds more than 2**63 - 1 "
                            "elements")
    return tuple(out)


def check_chunk_nbytes(chunks: tuple[int, ...], itemsize: int, field: str, where: str) -> None:
    """A chunk of ``chunks`` elements of ``itemsize`` bytes must fit an int64 of bytes."""
    if math.prod(chunks) * itemsize > INT64_MAX:
        raise MetadataError(f"{where}: field {field!r}: a chunk of {list(chunks)} items of "
                            f"{itemsize} bytes is larger than 2**63 - 1 bytes")


def check_grid(shape: Any, chunks: Any, itemsize: int, where: str) -> None:
    """Sizes that do not fit an int64 (entries, element counts, chunk bytes) raise
    MetadataError: the check of metadata built from arguments rather than JSON."""
    for field, value in (("shape", shape), ("chunks", chunks)):
        entries = [int(v) for v in value]
        if any(v < 0 or v > INT64_MAX for v in entries) or math.prod(entries) > INT64_MAX:
            raise MetadataError(f"{where}: field {field!r}: {entries} does not fit an int64 "
                                "element count")
    check_chunk_nbytes(tuple(int(c) for c in chunks), itemsize, "chunks", where)
