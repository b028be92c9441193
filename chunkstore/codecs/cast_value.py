"""The ``cast_value`` codec (zarr-extensions): store values converted to another numeric
type, e.g. float64 data as int16 (with ``scale_offset`` before it: netCDF-style packing).

The configuration: ``data_type`` (the stored type), ``rounding`` (default
``"nearest-even"``), ``out_of_range`` (``"clamp"``, ``"wrap"`` or absent: an error) and
``scalar_map`` (``{"encode": [[in, out], ...], "decode": [...]}``, each value written as
a fill value of its type). Decoding converts back with the same rules and the
``decode`` map. The conversion itself is :func:`.value_cast.cast_values`.

The fill value goes through the codec as the elements do; a chain built for a new
array must give it back unchanged (:meth:`CastValueCodec.fill_round_trip_error`).

>>> import numpy as np
>>> from chunkstore.codecs.base import ChunkSpec
>>> c = CastValueCodec("int8", out_of_range="clamp").resolve(ChunkSpec((3,), np.dtype("f8")))
>>> c.encode(np.array([1.5, 2.5, 300.0])).tolist()
[2, 2, 127]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.codecs.base import ArrayArrayCodec, ChunkSpec
from chunkstore.codecs.scalars import scalar_from_json
from chunkstore.codecs.value_cast import (
    NUMERIC_NAMES,
    OUT_OF_RANGE,
    ROUNDINGS,
    UNSUPPORTED_NAMES,
    cast_values,
    is_numeric,
)
from chunkstore.errors import CodecError, UnsupportedError

_WHERE = "codec 'cast_value'"
_KEYS = frozenset({"data_type", "rounding", "out_of_range", "scalar_map"})


def numeric_type(name: Any, where: str) -> np.dtype:
    """The NumPy type of a ``data_type`` name the cast codecs work with (also written
    as an object with just a ``name``)."""
    if isinstance(name, dict) and set(name) <= {"name", "configuration"} and not name.get(
            "configuration"):
        name = name.get("name")
    if isinstance(name, str) and name in UNSUPPORTED_NAMES:
        raise UnsupportedError(f"{where}: data type {name!r} is not supported here "
                               f"(supported: {', '.join(NUMERIC_NAMES)})")
    if not isinstance(name, str) or name not in NUMERIC_NAMES:
        raise CodecError(f"{where}: data type {name!r} is not an integer or float type "
                         f"(one of {', '.join(NUMERIC_NAMES)})")
    return np.dtype(name)


class CastValueCodec(ArrayArrayCodec):
    """``cast_value``: elements converted to ``data_type`` by value (see module doc)."""

    name = "cast_value"

    def __init__(self, data_type: Any, rounding: str | None = None,
                 out_of_range: str | None = None, scalar_map: Any = None) -> None:
        self.data_type = data_type
        self.target = numeric_type(data_type, f"{_WHERE}: field 'data_type'")
        if rounding is not None and rounding not in ROUNDINGS:
            raise CodecError(f"{_WHERE}: rounding must be one of {list(ROUNDINGS)}, got "
                             f"{rounding!r}")
        if out_of_range not in OUT_OF_RANGE:
            raise CodecError(f"{_WHERE}: out_of_range must be 'clamp' or 'wrap' (or absent), "
                             f"got {out_of_range!r}")
        if out_of_range == "wrap" and self.target.kind not in "iu":
            raise CodecError(f"{_WHERE}: out_of_range 'wrap' needs an integer data_type, got "
                             f"{data_type!r}")
        self.rounding_given = rounding  # None: absent from the JSON
        self.rounding = rounding or "nearest-even"
        self.out_of_range = out_of_range
        self.scalar_map = _check_map(scalar_map)
        # set by resolve():
        self.source: np.dtype | None = None
        self.encode_map: list[tuple[Any, Any]] = []
        self.decode_map: list[tuple[Any, Any]] = []

    def configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"data_type": self.data_type}
        if self.rounding_given is not None:
            config["rounding"] = self.rounding_given
        if self.out_of_range is not None:
            config["out_of_range"] = self.out_of_range
        if self.scalar_map is not None:
            config["scalar_map"] = self.scalar_map
        return config

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> CastValueCodec:
        unknown = sorted(set(config) - _KEYS)
        if unknown:  # the spec: readers MUST treat additional keys as invalid
            raise CodecError(f"{where}: codec 'cast_value': unknown configuration key(s) "
                             f"{unknown}")
        if "data_type" not in config:
            raise CodecError(f"{where}: codec 'cast_value' needs 'data_type'")
        return cls(config["data_type"], config.get("rounding"), config.get("out_of_range"),
                   config.get("scalar_map"))

    def resolve(self, spec: ChunkSpec) -> CastValueCodec:
        if not is_numeric(spec.dtype):
            raise CodecError(f"{_WHERE}: cannot cast {spec.dtype} values (only integer and "
                             f"float types: {', '.join(NUMERIC_NAMES)})")
        out = CastValueCodec(self.data_type, self.rounding_given, self.out_of_range,
                             self.scalar_map)
        out.source = np.dtype(spec.dtype).newbyteorder("=")
        smap = self.scalar_map or {}
        out.encode_map = [(scalar_from_json(k, out.source, f"{_WHERE}: scalar_map encode key"),
                           scalar_from_json(v, self.target, f"{_WHERE}: scalar_map encode value"))
                          for k, v in smap.get("encode", ())]
        out.decode_map = [(scalar_from_json(k, self.target, f"{_WHERE}: scalar_map decode key"),
                           scalar_from_json(v, out.source, f"{_WHERE}: scalar_map decode value"))
                          for k, v in smap.get("decode", ())]
        return out

    def output_spec(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(spec.shape, self.target)

    def output_fill(self, spec: ChunkSpec) -> Any:
        """The fill value cast as the elements are (CodecError when it cannot be, or
        cannot be cast back)."""
        fill = self._fill_there(spec)
        self._fill_back(fill, spec)
        return fill

    def fill_round_trip_error(self, spec: ChunkSpec) -> str | None:
        """Why the fill value of ``spec`` would not come back unchanged through this
        codec (None: it does), as the spec requires of a new array."""
        back = self._fill_back(self._fill_there(spec), spec)
        fill = np.asarray(spec.fill_value, dtype=self.source)
        if np.asarray(back).tobytes() == fill.tobytes() or (
                fill.dtype.kind == "f" and np.isnan(fill) and np.isnan(back)):
            return None
        return (f"the fill value {fill.item()!r} comes back as {np.asarray(back).item()!r} "
                f"after a cast to {self.target} and back; choose a fill value the stored "
                "type holds, or map it with 'scalar_map'")

    def _fill_there(self, spec: ChunkSpec) -> Any:
        try:
            return self.encode(np.asarray(spec.fill_value, dtype=spec.dtype).reshape(1))[0]
        except CodecError as e:
            raise CodecError(f"{_WHERE}: the fill value: {e}") from None

    def _fill_back(self, fill: Any, spec: ChunkSpec) -> Any:
        try:
            return self.decode(np.asarray(fill, dtype=self.target).reshape(1), spec)[0]
        except CodecError as e:
            raise CodecError(f"{_WHERE}: the fill value cast back: {e}") from None

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        self._check_resolved()
        return cast_values(chunk, self.target, self.rounding, self.out_of_range,
                           self.encode_map)

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        self._check_resolved()
        return cast_values(chunk, spec.dtype, self.rounding, self.out_of_range,
                           self.decode_map)

    def _check_resolved(self) -> None:
        if self.source is None:
            raise CodecError(f"{_WHERE} used before being resolved")


def _check_map(value: Any) -> dict[str, list[list[Any]]] | None:
    """A ``scalar_map``: ``{"encode"?: [[in, out], ...], "decode"?: [...]}``."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"encode", "decode"}:
        raise CodecError(f"{_WHERE}: scalar_map must be an object with 'encode' and/or "
                         f"'decode' lists, got {value!r}")
    out = {}
    for direction, pairs in value.items():
        if not isinstance(pairs, list | tuple) or not all(
                isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
            raise CodecError(f"{_WHERE}: scalar_map {direction!r} must be a list of "
                             f"[input, output] pairs, got {pairs!r}")
        out[direction] = [list(p) for p in pairs]
    return out
