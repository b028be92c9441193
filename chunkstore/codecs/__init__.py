"""The chunk codec pipeline: v3 codecs and v2 filters/compressor, all via numcodecs."""

from .base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from .bytes_codec import BytesCodec
from .cast_value import CastValueCodec
from .compressors import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from .enums import BloscCname, BloscShuffle, Endian, ShardingCodecIndexLocation
from .limits import DecodeLimits, decode_limits, set_decode_limits
from .numcodecs_adapter import UNSAFE_IDS, numcodecs_from_config, wrap_numcodecs
from .pipeline import CodecPipeline, Pipeline, V2Pipeline, build_pipeline
from .registry import codec_from_json, register_codec
from .scale_offset import ScaleOffsetCodec
from .sharding import ShardingCodec
from .transpose import TransposeCodec

__all__ = [
    "ArrayArrayCodec", "ArrayBytesCodec", "BloscCname", "BloscCodec", "BloscShuffle",
    "BytesBytesCodec", "BytesCodec", "CastValueCodec", "ChunkSpec", "Codec", "CodecPipeline",
    "Crc32cCodec", "DecodeLimits", "Endian", "GzipCodec", "Pipeline", "ScaleOffsetCodec",
    "ShardingCodec", "ShardingCodecIndexLocation", "decode_limits", "set_decode_limits",
    "TransposeCodec", "UNSAFE_IDS", "V2Pipeline", "ZstdCodec", "build_pipeline",
    "codec_from_json", "numcodecs_from_config", "register_codec", "wrap_numcodecs",
]
