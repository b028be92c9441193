"""Strict JSON decoding and encoding of metadata documents."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError
from chunkstore.metadata.json_scan import as_utf8, cheap_bounds, outline
from chunkstore.runtime import current

#: the deepest nesting of arrays and objects a metadata document may have
MAX_JSON_DEPTH = 128
#: the deepest a user value (attributes) may nest: it sits two levels down in zarr.json
MAX_VALUE_DEPTH = MAX_JSON_DEPTH - 2
INT64_MAX = 2**63 - 1
#: documents up to this size try a cheaper bound first (larger ones nearly always need
#: the scan: it is skipped only when nothing can reach a limit)
_SMALL = 2**20


def _caps() -> tuple[int, int]:
    budgets = current().budgets
    return budgets.metadata_max_bytes, budgets.metadata_max_elements


def check_document(raw: bytes | bytearray | memoryview | str, where: str, *,
                   writing: bool = False, depth: bool = True) -> bytes:
    """Refuse, before it is parsed, a document larger than ``metadata.max_bytes``, with
    more JSON values than ``metadata.max_elements`` or nesting deeper than
    ``MAX_JSON_DEPTH`` (MetadataError naming it and the setting to raise); return its
    UTF-8 bytes. Linear in the document's size, and a few MiB of scratch memory at most
    (``json_scan``): parsing is what costs memory, and it comes after. ``writing``: the
    document is about to be stored (refused too: readers would refuse it). ``depth=False``
    leaves the depth to the caller (a parser that falls back to :func:`load_json` on
    RecursionError): the document is then scanned only when it may be over the caps."""
    max_bytes, max_elements = _caps()
    action = "write" if writing else "open"
    size = len(raw)
    if size > max_bytes:
        raise MetadataError(f"{where}: the document has {size} bytes, more than the "
                            f"{max_bytes} a metadata document may have (chunkstore config "
                            f"'metadata.max_bytes': raise it to {action} this document)")
    try:
        data = as_utf8(raw)
    except (UnicodeError, ValueError) as e:
        raise MetadataError(f"{where}: malformed JSON: {e}") from e
    if len(data) <= _SMALL or not depth:
        values, openers = cheap_bounds(data)
        if (openers <= MAX_JSON_DEPTH or not depth) and values <= max_elements:
            return data  # neither limit can be reached: no scan needed
    found = outline(data, MAX_JSON_DEPTH)
    if found.too_deep_at >= 0:
        field = outline(data, MAX_JSON_DEPTH, find_field=True).field
        raise MetadataError(f"{where}: {_field_label(field)}nests JSON deeper than "
                            f"{MAX_JSON_DEPTH} levels")
    if found.values > max_elements:
        raise MetadataError(f"{where}: the document holds about {found.values} JSON values "
                            f"(objects and arrays, and items separated by commas), more than "
                            f"the {max_elements} a metadata document may hold (chunkstore "
                            f"config 'metadata.max_elements': raise it to {action} this document)")
    return data


def load_json(raw: bytes, where: str) -> dict[str, Any]:
    """Parse a metadata document; any malformation raises MetadataError naming it,
    including nesting deeper than ``MAX_JSON_DEPTH`` (which would otherwise exhaust the
    interpreter's recursion limit, here or in the code that walks the document) and a
    size or number of values over the caps of :func:`check_document`, checked before
    parsing."""
    data = check_document(raw, where)
    try:
        # bare NaN / Infinity are not JSON, but Python's json (so zarr-python) writes them
        # in attributes: read as floats, as zarr-python does
        doc = json.loads(data)
    except RecursionError:  # not reached past the depth check; kept as a backstop
        raise MetadataError(f"{where}: nests JSON deeper than {MAX_JSON_DEPTH} levels"
                            ) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"{where}: malformed JSON: {e}") from e
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _field_label(field: str | None) -> str:
    return "" if field is None else f"field {field!r} "


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
        raw = json.dumps(doc, indent=2, default=_default).encode()
    except (TypeError, ValueError, RecursionError) as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e
    return check_document(raw, where, writing=True)


class JSONTypeError(MetadataError, TypeError):
    """A value of a type JSON cannot hold (a TypeError, as ``json.dumps`` and zarr-python
    raise, and a MetadataError naming the node)."""


def check_json_value(value: Any, where: str) -> Any:
    """Validate that a user value (attributes) is plain JSON; return it normalized.

    A value of a non-JSON type raises JSONTypeError (a TypeError); NaN or infinity, which
    strict JSON cannot hold, and nesting deeper than a document may have (readers refuse
    it: the node could never be opened again) raise MetadataError (a ValueError)."""
    try:
        text = json.dumps(value, allow_nan=False, default=_default).encode()
    except TypeError as e:
        raise JSONTypeError(f"{where}: value is not JSON-serializable: {e}") from e
    except (ValueError, RecursionError) as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e
    if cheap_bounds(text)[1] > MAX_VALUE_DEPTH and \
            outline(text, MAX_VALUE_DEPTH).too_deep_at >= 0:
        raise MetadataError(f"{where}: value nests JSON deeper than {MAX_VALUE_DEPTH} "
                            "levels (readers refuse deeper documents)")
    return json.loads(text)


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
