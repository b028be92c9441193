"""The chunk codec pipeline: v3 codecs and v2 filters/compressor, all via numcodecs."""

from chunkstore.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
)
from chunkstore.codecs.bytes_codec import BytesCodec
from chunkstore.codecs.cast_value import CastValueCodec
from chunkstore.codecs.compressors import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from chunkstore.codecs.convert import check_default_compressor
from chunkstore.codecs.enums import BloscCname, BloscShuffle, Endian, ShardingCodecIndexLocation
from chunkstore.codecs.limits import DecodeLimits, decode_limits, set_decode_limits
from chunkstore.codecs.numcodecs_adapter import UNSAFE_IDS, numcodecs_from_config, wrap_numcodecs
from chunkstore.codecs.pipeline import CodecPipeline, Pipeline, V2Pipeline, build_pipeline
from chunkstore.codecs.registry import codec_from_json, register_codec
from chunkstore.codecs.scale_offset import ScaleOffsetCodec
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.config import config

__all__ = [
    "ArrayArrayCodec", "ArrayBytesCodec", "BloscCname", "BloscCodec", "BloscShuffle",
    "BytesBytesCodec", "BytesCodec", "CastValueCodec", "ChunkSpec", "Codec", "CodecPipeline",
    "Crc32cCodec", "DecodeLimits", "Endian", "GzipCodec", "Pipeline", "ScaleOffsetCodec",
    "ShardingCodec", "ShardingCodecIndexLocation", "decode_limits", "set_decode_limits",
    "TransposeCodec", "UNSAFE_IDS", "V2Pipeline", "ZstdCodec", "build_pipeline",
    "codec_from_json", "numcodecs_from_config", "register_codec", "wrap_numcodecs",
]

# the codecs judge the compressors users configure (config cannot import them)
config.add_check("array.default_compressor", check_default_compressor)
