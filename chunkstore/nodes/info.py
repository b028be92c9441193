"""The ``info`` tables of arrays and groups (plain text, and HTML for notebooks), and a
readable form of codec chains."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from chunkstore.sizes import format_bytes


def human_bytes(n: float) -> str:
    """``1234567`` -> ``'1.2 MiB'``, ``512000000`` -> ``'512 MB'``: the one way byte counts
    are shown (:func:`chunkstore.sizes.format_bytes`: MB = 10**6, MiB = 2**20)."""
    return format_bytes(n)


def dtype_name(dtype: Any) -> str:
    """A data type as Zarr names it where NumPy's name differs: ``string`` for
    variable-length strings (NumPy's ``StringDType()``), else NumPy's name (``int32``).

    >>> import numpy as np
    >>> dtype_name(np.dtypes.StringDType()), dtype_name(np.dtype("<f8"))
    ('string', 'float64')
    """
    return "string" if getattr(dtype, "kind", None) == "T" else str(dtype)


class InfoTable:
    """Rows of (name, value); prints aligned, renders as an HTML table in notebooks."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows

    def __repr__(self) -> str:
        width = max((len(k) for k, _ in self.rows), default=0)
        return "\n".join(f"{k:<{width}} : {v}" for k, v in self.rows)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.rows)
        return f"<table>{body}</table>"

    def __getitem__(self, key: str) -> str:
        return dict(self.rows)[key]


_BLOSC_SHUFFLE = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle", -1: "autoshuffle"}
#: configuration fields not worth showing (derived from the data type, or defaults)
_QUIET = {"typesize", "blocksize", "astype"}


def _plain(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "(" + ", ".join(_plain(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def format_codec(codec: Mapping[str, Any] | Any) -> str:
    """One codec, e.g. ``blosc(lz4, clevel 5, shuffle)``, from its v3 document
    (``{"name": ..., "configuration": {...}}``), its v2 / numcodecs config
    (``{"id": ..., ...}``) or a numcodecs codec object.

    >>> format_codec({"name": "bytes", "configuration": {"endian": "little"}})
    'bytes(little)'
    >>> format_codec({"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0})
    'blosc(zstd, clevel 3, bitshuffle)'
    """
    if not isinstance(codec, Mapping):
        codec = codec.get_config() if hasattr(codec, "get_config") else {"id": str(codec)}
    if "name" in codec:
        name, config = str(codec["name"]), dict(codec.get("configuration") or {})
    else:
        config = dict(codec)
        name = str(config.pop("id", "?"))
    if name == "sharding_indexed":
        inner = codec_chain(config.get("codecs", []))
        index = codec_chain(config.get("index_codecs", []))
        return (f"sharding(chunks {_plain(config.get('chunk_shape', []))}: {inner}; "
                f"index at {config.get('index_location', 'end')}: {index})")
    parts = []
    if name == "blosc":
        shuffle = config.pop("shuffle", None)
        parts.append(str(config.pop("cname", "?")))
        if "clevel" in config:
            parts.append(f"clevel {config.pop('clevel')}")
        parts.append(_BLOSC_SHUFFLE.get(shuffle, str(shuffle)) if isinstance(shuffle, int)
                     else str(shuffle))
    elif name == "bytes" and "endian" in config:
        parts.append(str(config.pop("endian")))
    elif name == "transpose" and "order" in config:
        parts.append(f"order {_plain(config.pop('order'))}")
    parts += [f"{k} {_plain(v)}" for k, v in config.items() if k not in _QUIET]
    return f"{name}({', '.join(parts)})" if parts else name


def codec_chain(codecs: Sequence[Mapping[str, Any] | Any]) -> str:
    """Codecs in the order data goes through them when written, joined by arrows, e.g.
    ``bytes(little) -> blosc(lz4, clevel 5, shuffle)``; ``none`` when there are none.

    >>> codec_chain([{"name": "bytes", "configuration": {"endian": "little"}},
    ...              {"name": "gzip", "configuration": {"level": 5}}])
    'bytes(little) -> gzip(level 5)'
    """
    return " -> ".join(format_codec(c) for c in codecs if c is not None) or "none"


def array_codec_chain(metadata_json: Mapping[str, Any]) -> str:
    """The codec chain of an array from its metadata document: the v3 ``codecs``, or the
    v2 ``filters`` then ``compressor``."""
    if metadata_json.get("zarr_format") == 3:
        return codec_chain(metadata_json.get("codecs") or [])
    return codec_chain([*(metadata_json.get("filters") or []), metadata_json.get("compressor")])
