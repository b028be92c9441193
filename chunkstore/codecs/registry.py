"""v3 codec names -> codec classes, and parsing of a ``codecs`` list."""

from __future__ import annotations

from typing import Any

from chunkstore.codecs.base import Codec
from chunkstore.codecs.bytes_codec import BytesCodec
from chunkstore.codecs.cast_value import CastValueCodec
from chunkstore.codecs.compressors import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from chunkstore.codecs.numcodecs_adapter import numcodecs_from_config, wrap_numcodecs
from chunkstore.codecs.scale_offset import ScaleOffsetCodec
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.codecs.vlen import VLenBytesCodec, VLenUTF8Codec
from chunkstore.errors import CodecError

NATIVE_CODECS: dict[str, type[Codec]] = {
    c.name: c for c in (BytesCodec, TransposeCodec, BloscCodec, GzipCodec, ZstdCodec, Crc32cCodec,
                        VLenUTF8Codec, VLenBytesCodec, CastValueCodec, ScaleOffsetCodec)
}


def register_codec(cls: type[Codec]) -> type[Codec]:
    """Register a native v3 codec class under its ``name`` (used as a decorator)."""
    NATIVE_CODECS[cls.name] = cls
    return cls


def codec_from_json(entry: dict[str, Any], where: str, allow_unsafe: bool = False) -> Codec:
    """Build one codec from its v3 JSON entry; errors name the document and codec."""
    name = entry["name"]
    config = dict(entry.get("configuration") or {})
    if name in NATIVE_CODECS:
        try:
            return NATIVE_CODECS[name].from_json(config, where)
        except CodecError as e:
            raise CodecError(f"{where}: field 'codecs': {e}") from e
        except TypeError as e:
            raise CodecError(f"{where}: field 'codecs': codec {name!r}: bad configuration "
                             f"{config!r}: {e}") from e
    if name.startswith("numcodecs."):
        config.pop("id", None)
        codec = numcodecs_from_config({"id": name[len("numcodecs."):], **config},
                                      f"{where}: field 'codecs'", allow_unsafe)
        return wrap_numcodecs(codec)
    raise CodecError(f"{where}: field 'codecs': unknown codec {name!r}")
