"""What a new array made "like" another keeps of it (zarr-python's ``*_like`` functions
and ``Group.*_like`` methods): shape, dtype and regular chunks of any array-like; of a
chunkstore Array also its format, fill value, memory order and codecs, the codecs only
where the new array can use them."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.array.array import Array
from chunkstore.array.grids import grid_arguments
from chunkstore.metadata.dtypes_extra import user_dtype

#: arguments that choose codecs: given any of them, none of the source's are carried
CODEC_ARGS = ("codecs", "compressors", "compressor", "filters", "serializer", "compression")


def regular_chunks(source: Any) -> tuple[int, ...] | None:
    """The regular chunk shape of an array-like (Array, h5py dataset), or None: a dask
    array's chunks (a tuple of tuples) or an unchunked dataset's give no answer."""
    try:
        chunks = getattr(source, "chunks", None)
    except NotImplementedError:  # an Array of rectilinear chunks
        return None
    if isinstance(chunks, tuple) and all(isinstance(c, int | np.integer) for c in chunks):
        return tuple(int(c) for c in chunks)
    return None


def _ndim(shape: Any) -> int:
    return 1 if isinstance(shape, int | np.integer) else len(tuple(shape))


def like_arguments(a: Any, kwargs: dict[str, Any], *, keep_fill: bool = False
                   ) -> dict[str, Any]:
    """``kwargs`` (the caller's, which win) completed for a new array like ``a``: its
    shape, dtype and chunks (when they fit the new shape); for an Array also its
    ``zarr_format`` (unless one is given; None means the source's too), fill value
    (``keep_fill``), memory order and, in the same format, its codecs: the whole chain
    when dtype and number of dimensions are kept (of a sharded array, with its shards,
    when its chunks are kept too), else only its compressors (bytes to bytes: any dtype
    can use them). A caller that chooses any codec argument gets none of the source's."""
    kwargs.setdefault("shape", tuple(a.shape))
    kwargs.setdefault("dtype", a.dtype)
    chunks = regular_chunks(a)
    if chunks is not None and len(chunks) == _ndim(kwargs["shape"]):
        kwargs.setdefault("chunks", chunks)
    elif (isinstance(a, Array) and a.layout.edges is not None and a.layout.shards is None
          and not isinstance(kwargs["shape"], int | np.integer)
          and tuple(kwargs["shape"]) == a.shape):
        kwargs.setdefault("chunks", grid_arguments(a.metadata)[0])  # the same lengths
    if not isinstance(a, Array):
        return kwargs
    if kwargs.get("zarr_format") is None:
        kwargs["zarr_format"] = a.zarr_format
    if keep_fill:
        kwargs.setdefault("fill_value", a.fill_value)
    if kwargs["zarr_format"] != a.zarr_format or any(k in kwargs for k in CODEC_ARGS):
        return kwargs
    kwargs.setdefault("order", a.order)
    same = (_ndim(kwargs["shape"]) == a.ndim
            and user_dtype(kwargs["dtype"], "like") == a.dtype)
    meta = a.metadata
    if a.zarr_format == 2:
        kwargs["compressor"] = meta.compressor  # type: ignore[union-attr]
        if same:
            kwargs["filters"] = meta.filters  # type: ignore[union-attr]
        return kwargs
    if same and a.layout.shards is None:
        kwargs["codecs"] = list(meta.codecs)  # type: ignore[union-attr]
    elif (same and a.layout.edges is None and kwargs.get("chunks") == a.chunks
          and "shards" not in kwargs):
        sharding = meta.codecs[0]["configuration"]  # type: ignore[union-attr]
        kwargs["shards"] = {"shape": a.shards,
                            "index_location": sharding.get("index_location", "end")}
        kwargs["codecs"] = list(sharding["codecs"])
    else:
        kwargs["compressors"] = list(a.compressors)
    return kwargs
