"""The ``scale_offset`` codec (zarr-extensions): ``(x - offset) * scale`` on encoding,
``x / scale + offset`` on decoding, in the arithmetic of the input's own type.

``offset`` (default 0) and ``scale`` (default 1) are written as fill values of that
type. Floats compute step by step in their type (overflow gives infinity, as IEEE 754
does). Integers must stay exact: a value whose difference, product or quotient leaves
the type, or that ``scale`` does not divide on decoding, is an error (never wrapped
silently). The range checks are worked out once per codec, as an interval of the inputs
that are safe, so that a chunk costs a comparison or two per element.

>>> import numpy as np
>>> from chunkstore.codecs.base import ChunkSpec
>>> c = ScaleOffsetCodec(offset=1000).resolve(ChunkSpec((2,), np.dtype("u2")))
>>> c.encode(np.array([1000, 1255], "u2")).tolist()
[0, 255]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.codecs.base import ArrayArrayCodec, ChunkSpec
from chunkstore.codecs.cast_value import numeric_type
from chunkstore.codecs.scalars import scalar_from_json
from chunkstore.codecs.value_cast import NUMERIC_NAMES, is_numeric
from chunkstore.errors import CodecError

_WHERE = "codec 'scale_offset'"
_KEYS = frozenset({"offset", "scale"})


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


class ScaleOffsetCodec(ArrayArrayCodec):
    """``scale_offset``: ``(x - offset) * scale`` (see module doc)."""

    name = "scale_offset"

    def __init__(self, offset: Any = None, scale: Any = None) -> None:
        for label, value in (("offset", offset), ("scale", scale)):
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int | float | str)):
                raise CodecError(f"{_WHERE}: {label} must be a number (or a fill-value "
                                 f"string such as 'NaN'), got {value!r}")
        self.offset_json, self.scale_json = offset, scale  # None: absent
        # set by resolve():
        self.dtype: np.dtype | None = None
        self.offset: Any = None
        self.scale: Any = None
        self._encode_in: tuple[int, int] | None = None  # safe inputs (integer types)
        self._decode_in: tuple[int, int] | None = None

    def configuration(self) -> dict[str, Any]:
        return {k: v for k, v in (("offset", self.offset_json), ("scale", self.scale_json))
                if v is not None}

    def to_json(self) -> dict[str, Any]:
        config = self.configuration()  # no configuration at all for the identity
        return {"name": self.name, **({"configuration": config} if config else {})}

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> ScaleOffsetCodec:
        unknown = sorted(set(config) - _KEYS)
        if unknown:  # the spec: readers MUST treat additional keys as invalid
            raise CodecError(f"{where}: codec 'scale_offset': unknown configuration key(s) "
                             f"{unknown}")
        return cls(config.get("offset"), config.get("scale"))

    def resolve(self, spec: ChunkSpec) -> ScaleOffsetCodec:
        if not is_numeric(spec.dtype):
            raise CodecError(f"{_WHERE}: cannot scale {spec.dtype} values (only integer and "
                             f"float types: {', '.join(NUMERIC_NAMES)})")
        dtype = numeric_type(np.dtype(spec.dtype).newbyteorder("=").name, _WHERE)
        out = ScaleOffsetCodec(self.offset_json, self.scale_json)
        out.dtype = dtype
        out.offset = out._parse("offset", self.offset_json, 0)
        out.scale = out._parse("scale", self.scale_json, 1)
        if out.scale == 0:
            raise CodecError(f"{_WHERE}: scale must not be zero")
        if dtype.kind in "iu":
            out._integer_bounds()
        return out

    def _parse(self, label: str, value: Any, default: int) -> Any:
        if value is None:
            return self.dtype.type(default)
        return scalar_from_json(value, self.dtype, f"{_WHERE}: {label}")

    def _integer_bounds(self) -> None:
        """The inputs each direction maps inside the type (Python integers: exact)."""
        info = np.iinfo(self.dtype)
        lo, hi, o, s = int(info.min), int(info.max), int(self.offset), int(self.scale)
        # encoding: d = x - o and d * s both inside [lo, hi]
        dlo, dhi = (_ceil_div(lo, s), hi // s) if s > 0 else (_ceil_div(hi, s), lo // s)
        dlo, dhi = max(lo, dlo), min(hi, dhi)
        self._encode_in = (max(lo, dlo + o), min(hi, dhi + o))
        # decoding: q = y / s and q + o both inside [lo, hi]; y = q * s
        qlo, qhi = max(lo, lo - o), min(hi, hi - o)
        ylo, yhi = (qlo * s, qhi * s) if s > 0 else (qhi * s, qlo * s)
        self._decode_in = (max(lo, ylo), min(hi, yhi))

    def output_fill(self, spec: ChunkSpec) -> Any:
        """The fill value encoded as the elements are."""
        return self.encode(np.asarray(spec.fill_value, dtype=self.dtype).reshape(1))[0]

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        x = self._native(chunk)
        if self._encode_in is None:
            with np.errstate(all="ignore"):
                return (x - self.offset) * self.scale
        self._check(x, self._encode_in, "encoding")
        with np.errstate(all="ignore"):  # checked: nothing wraps
            return (x - self.offset) * self.scale

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        y = self._native(chunk)
        if self._decode_in is None:
            with np.errstate(all="ignore"):
                return y / self.scale + self.offset
        self._check(y, self._decode_in, "decoding")
        with np.errstate(all="ignore"):
            inexact = (y % self.scale) != 0
            if inexact.any():
                first = y.reshape(-1)[int(np.flatnonzero(inexact.reshape(-1))[0])]
                raise CodecError(f"{_WHERE}: decoding: {first.item()!r} / scale "
                                 f"{self.scale.item()!r} is not a whole number ({self.dtype} "
                                 "cannot hold it)")
            return y // self.scale + self.offset

    def _native(self, chunk: np.ndarray) -> np.ndarray:
        if self.dtype is None:
            raise CodecError(f"{_WHERE} used before being resolved")
        return np.asarray(chunk).astype(self.dtype, copy=False)

    def _check(self, x: np.ndarray, bounds: tuple[int, int], what: str) -> None:
        info = np.iinfo(self.dtype)
        lo, hi = bounds
        if lo > hi:
            bad = np.ones(x.shape, bool)
        else:
            bad = np.zeros(x.shape, bool)
            if lo > int(info.min):
                bad |= x < self.dtype.type(lo)
            if hi < int(info.max):
                bad |= x > self.dtype.type(hi)
        if bad.any():
            first = x.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
            raise CodecError(f"{_WHERE}: {what} {first.item()!r} with offset "
                             f"{self.offset.item()!r} and scale {self.scale.item()!r} leaves "
                             f"the range of {self.dtype}")
