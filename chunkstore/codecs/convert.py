"""Turn the user's ``compressors=`` / ``filters=`` / ``codecs=`` arguments into metadata.

Accepted items: numcodecs codec objects, chunkstore codec objects, v3 JSON entries
(``{"name": ...}``) and numcodecs configs (``{"id": ...}``). ``"auto"`` picks the default
compressor: Blosc(lz4, clevel 5, byte shuffle) — fast, and what zarr-python 2 used.
"""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from chunkstore.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
)
from chunkstore.codecs.bytes_codec import BytesCodec
from chunkstore.codecs.compressors import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from chunkstore.codecs.numcodecs_adapter import numcodecs_from_config, wrap_numcodecs
from chunkstore.codecs.pipeline import CodecPipeline
from chunkstore.codecs.registry import codec_from_json
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.codecs.vlen import VLenBytesCodec, VLenUTF8Codec, vlen_codec_for
from chunkstore.errors import CodecError

_BYTES_FILTER_IDS = frozenset({"shuffle"})  # v2 filters that are bytes->bytes codecs in v3


def default_v3_compressor() -> BytesBytesCodec:
    return BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")


def default_v2_compressor() -> Any:
    return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def to_v3_codec(item: Any, where: str, allow_unsafe: bool = False) -> Codec:
    """One user-given codec as a v3 codec object."""
    if isinstance(item, Codec):
        return item
    if isinstance(item, str):
        item = {"name": item}
    if isinstance(item, dict):
        if "name" in item:
            return codec_from_json({"name": item["name"],
                                    "configuration": item.get("configuration", {})},
                                   where, allow_unsafe)
        item = numcodecs_from_config(item, where, allow_unsafe)
    if isinstance(item, numcodecs.abc.Codec):
        config = item.get_config()
        cid = config.get("id")
        if cid == "blosc":
            # an int shuffle: AUTOSHUFFLE (-1) becomes "shuffle", one out of range an error
            return BloscCodec(config.get("cname", "lz4"), config.get("clevel", 5),
                              config.get("shuffle", 1), None, config.get("blocksize", 0))
        if cid == "zstd":
            return ZstdCodec(config.get("level", 0), config.get("checksum", False))
        if cid == "gzip":
            return GzipCodec(config.get("level", 5))
        if cid == "crc32c":
            return Crc32cCodec()
        if cid in ("vlen-utf8", "vlen-bytes"):  # the v2 object codec is v3's array->bytes codec
            return VLenUTF8Codec() if cid == "vlen-utf8" else VLenBytesCodec()
        numcodecs_from_config(config, where, allow_unsafe)  # safety check
        return wrap_numcodecs(item)
    raise CodecError(f"{where}: cannot use {item!r} as a codec")


def to_numcodecs(item: Any, where: str, allow_unsafe: bool = False) -> Any:
    """One user-given codec as a numcodecs object (for v2 metadata)."""
    if isinstance(item, numcodecs.abc.Codec):
        numcodecs_from_config(item.get_config(), where, allow_unsafe)
        return item
    if isinstance(item, dict) and "id" in item:
        return numcodecs_from_config(item, where, allow_unsafe)
    if isinstance(item, dict) and "name" in item:
        item = to_v3_codec(item, where, allow_unsafe)
    if isinstance(item, BloscCodec):
        shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[item.shuffle]
        return numcodecs.Blosc(item.cname, item.clevel, shuffle, item.blocksize)
    if isinstance(item, ZstdCodec):
        return numcodecs.Zstd(level=item.level, checksum=item.checksum)
    if isinstance(item, GzipCodec):
        return numcodecs.GZip(item.level)
    if isinstance(item, Crc32cCodec):
        return numcodecs.CRC32C()
    if hasattr(item, "codec"):  # numcodecs adapters
        return item.codec
    raise CodecError(f"{where}: {item!r} has no Zarr v2 (numcodecs) equivalent")


def check_default_compressor(key: str, value: Any) -> Any:
    """The check of ``chunkstore.config`` ``array.default_compressor``: "auto", None, or a
    codec / list of codecs that new arrays can use as compressors: a v3 bytes->bytes codec
    (an object, ``"zstd"``, ``{"name": ...}``) or a v2 numcodecs compressor (an object or
    ``{"id": ...}``). Kept as given; the codecs' safety check is made when an array is
    created (``allow_unsafe_codecs``)."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    where = f"chunkstore config {key!r}"
    items = list(value) if isinstance(value, list | tuple) else [value]
    for item in items:
        problems = []
        try:
            if isinstance(to_v3_codec(item, where, True), BytesBytesCodec):
                continue
            problems.append(f"{item!r} is not a bytes->bytes codec")
        except Exception as e:  # any failure: the value is unusable
            problems.append(str(e))
        try:
            to_numcodecs(item, where, True)
            continue
        except Exception:
            pass
        raise ValueError(f"{where} must be 'auto', None, or a compressor (a codec object, "
                         f"a codec name such as 'zstd', a {{'name': ...}} or {{'id': ...}} "
                         f"config) or a list of them, got {value!r}: {problems[0]}")
    return value


def v3_codec_chain(*, dtype: np.dtype, chunk_shape: tuple[int, ...], compressors: Any,
                   filters: Any, codecs: Any, order: str, where: str,
                   allow_unsafe: bool = False, serializer: Any = "auto",
                   fill_value: Any = None) -> list[dict[str, Any]]:
    """The resolved ``codecs`` list of a new v3 array. ``serializer``: the array->bytes
    codec ("auto": ``bytes``, or ``vlen-utf8``/``vlen-bytes`` for variable-length types).
    ``fill_value``: the array's, checked to come back unchanged through lossy codecs."""
    auto = isinstance(serializer, str) and serializer == "auto"
    if codecs is not None and not auto:
        raise ValueError(f"{where}: give either codecs= or serializer=, not both")
    if codecs is not None:
        chain = [to_v3_codec(c, where, allow_unsafe) for c in _as_list(codecs)]
    else:
        if isinstance(compressors, str) and compressors == "auto":
            compressors = [default_v3_compressor()]
        pre: list[Codec] = []
        if order == "F" and len(chunk_shape) > 1:
            pre.append(TransposeCodec(list(range(len(chunk_shape)))[::-1]))
        given = [c for c in (to_v3_codec(f, where, allow_unsafe) for f in _as_list(filters))
                 if not isinstance(c, VLenUTF8Codec | VLenBytesCodec)]  # chosen by dtype below
        # the byte-shuffle filter is a bytes->bytes codec in v3: first of them
        mid = [c for c in given if getattr(c, "codec_id", None) in _BYTES_FILTER_IDS]
        pre += [c for c in given if c not in mid]
        post = [to_v3_codec(c, where, allow_unsafe) for c in _as_list(compressors)]
        for c in pre:
            if not isinstance(c, ArrayArrayCodec):
                raise CodecError(f"{where}: filter {c!r} is not an array->array codec")
        for c in post:
            if not isinstance(c, BytesBytesCodec):
                raise CodecError(f"{where}: compressor {c!r} is not a bytes->bytes codec")
        serialized = _filtered_dtype(pre, ChunkSpec(chunk_shape, dtype))
        if auto:
            ser: Codec = vlen_codec_for(serialized) or BytesCodec()
        else:
            ser = to_v3_codec(serializer, where, allow_unsafe)
            if not isinstance(ser, ArrayBytesCodec):
                raise CodecError(f"{where}: serializer {ser!r} is not an array->bytes codec")
        chain = [*pre, ser, *mid, *post]
    if not any(isinstance(c, ArrayBytesCodec) for c in chain):
        i = next((k for k, c in enumerate(chain) if isinstance(c, BytesBytesCodec)), len(chain))
        chain.insert(i, vlen_codec_for(dtype) or BytesCodec())
    try:
        pipeline = CodecPipeline(chain, ChunkSpec(chunk_shape, dtype, fill_value), where)
    except CodecError as e:
        if auto or "serializer" in str(e):
            raise
        raise CodecError(f"{where}: serializer={serializer!r} does not fit the data type "
                         f"{dtype}: {e}") from e
    check_fill_round_trip(pipeline, where)
    return pipeline.to_json()


def check_fill_round_trip(pipeline: CodecPipeline, where: str) -> None:
    """Refuse a new chain whose lossy array->array codecs (``cast_value``) do not give
    the fill value back as it went in, as their spec requires of writers: a part of a
    shard left out as fill would read back as another value. Nested chains included."""
    for codec, spec in pipeline.array_array:
        problem = codec.fill_round_trip_error(spec) if spec.fill_value is not None else None
        if problem:
            raise CodecError(f"{where}: codec {codec.name!r}: {problem}")
    if isinstance(pipeline.array_bytes, ShardingCodec) and pipeline.array_bytes.inner is not None:
        check_fill_round_trip(pipeline.array_bytes.inner, where)


def _filtered_dtype(filters: list[Codec], spec: ChunkSpec) -> np.dtype:
    """The data type the array->array ``filters`` turn a chunk of ``spec`` into (what
    the array->bytes codec serializes: ``categorize`` turns strings into integers)."""
    for f in filters:
        spec = f.resolve(spec).output_spec(spec)  # type: ignore[attr-defined]
    return spec.dtype


def v2_codecs(*, compressors: Any, filters: Any, where: str, allow_unsafe: bool = False
              ) -> tuple[dict[str, Any] | None, tuple[dict[str, Any], ...] | None]:
    """``(compressor, filters)`` configs of a new v2 array."""
    if isinstance(compressors, str) and compressors == "auto":
        compressors = [default_v2_compressor()]
    comp_list = [to_numcodecs(c, where, allow_unsafe) for c in _as_list(compressors)]
    if len(comp_list) > 1:
        raise CodecError(f"{where}: Zarr v2 arrays take at most one compressor, got {comp_list}")
    filt = tuple(_v2_config(to_numcodecs(f, where, allow_unsafe)) for f in _as_list(filters))
    return (_v2_config(comp_list[0]) if comp_list else None), (filt or None)


def _v2_config(codec: Any) -> dict[str, Any]:
    """A numcodecs config as zarr-python writes it: Zstd's default ``checksum: false`` is
    left out, since older numcodecs readers reject the unknown member."""
    config = codec.get_config()
    if config.get("id") == "zstd" and config.get("checksum") is False:
        config.pop("checksum")
    return config
