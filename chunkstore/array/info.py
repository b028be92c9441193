"""What ``Array`` reports about itself: its codecs, the chunk keys present, the bytes
stored and the ``info`` table."""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, Protocol

from chunkstore.array.facts import ArrayFacts
from chunkstore.array.grids import chunks_label, shards_label
from chunkstore.codecs.pipeline import CodecPipeline
from chunkstore.metadata import ArrayMetadata, join_path
from chunkstore.nodes.info import InfoTable, array_codec_chain, dtype_name, human_bytes

if TYPE_CHECKING:
    from chunkstore.io.engine import Engine


class StoredBytes(int):
    """``Array.nbytes_stored``: an int that can also be called (zarr-python 3 made it a
    method), so ``a.nbytes_stored`` and ``a.nbytes_stored()`` both work."""

    def __call__(self) -> int:
        return int(self)


class DescribedArray(ArrayFacts, Protocol):
    """What ``info_table`` shows of an Array (``array.Array``, which imports this
    module), besides its facts."""

    @property
    def order(self) -> str: ...
    @property
    def fill_value(self) -> Any: ...
    @property
    def zarr_format(self) -> int: ...
    @property
    def dimension_names(self) -> tuple[str | None, ...] | None: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def filters(self) -> tuple[Any, ...]: ...
    @property
    def compressors(self) -> tuple[Any, ...]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def nbytes_stored(self) -> int: ...
    @property
    def nchunks(self) -> int: ...
    @property
    def nchunks_initialized(self) -> int: ...


def compressors_of(engine: Engine) -> tuple[Any, ...]:
    """The bytes->bytes codecs (v3; inside the shards if sharded) or the compressor (v2)."""
    pipe = engine.chunk_pipeline
    if isinstance(pipe, CodecPipeline):
        return tuple(pipe.bytes_bytes)
    return (pipe.compressor,) if pipe.compressor is not None else ()


def filters_of(engine: Engine) -> tuple[Any, ...]:
    """The array->array codecs (v3; inside the shards if sharded) or the filters (v2)."""
    pipe = engine.chunk_pipeline
    if isinstance(pipe, CodecPipeline):
        return tuple(c for c, _ in pipe.array_array)
    return tuple(pipe.filters)


def chunk_key_pattern(meta: ArrayMetadata, ndim: int) -> re.Pattern[str]:
    """What the key of a stored chunk (or shard) looks like, relative to the array."""
    if meta.zarr_format == 3 and meta.chunk_key_encoding[0] == "default":
        sep = re.escape(meta.chunk_key_encoding[1])
        return re.compile("c" + "".join(sep + r"\d+" for _ in range(ndim)))
    sep = re.escape(meta.chunk_key_encoding[1] if meta.zarr_format == 3
                    else meta.dimension_separator)
    return re.compile(sep.join([r"\d+"] * ndim) if ndim else "0")


def stored_chunk_keys(array: ArrayFacts) -> list[str]:
    """The keys of the array's chunks (or shards) present in its store."""
    path, store = array.path, array.store
    prefix = f"{path}/" if path else ""
    pattern = chunk_key_pattern(array.metadata, array.ndim)
    return [k for k in store.list_prefix(prefix) if pattern.fullmatch(k[len(prefix):])]


def chunks_initialized(array: ArrayFacts) -> int:
    """Number of chunks present in the store; for a sharded array, as zarr-python counts:
    stored shards x inner chunks per shard."""
    keys = stored_chunk_keys(array)
    layout = array.layout
    if layout.shards is None:
        return len(keys)
    if layout.edges is None:
        return len(keys) * layout.chunks_per_unit
    units = [u for u in map(layout.unit_of_key, keys) if u is not None]
    return sum(math.prod(s // c for s, c in zip(layout.unit_shape(u), layout.chunks,
                                                 strict=True)) for u in units)


def nbytes_stored(array: ArrayFacts) -> StoredBytes:
    """Bytes stored for the array: metadata documents plus chunks."""
    store = array.store
    docs = [join_path(array.path, k) for k in ("zarr.json", ".zarray", ".zattrs")]
    keys = [k for k in docs if store.exists(k)] + stored_chunk_keys(array)
    return StoredBytes(sum(store.getsize(k) or 0 for k in keys))


def info_table(array: DescribedArray) -> InfoTable:
    """Type, shape, chunks, codecs, storage and compression ratio of ``array``."""
    stored = array.nbytes_stored
    meta = array.metadata
    extra = []
    if array.dimension_names is not None:
        extra.append(("Dimension names", str(tuple(array.dimension_names))))
    if meta.attributes:
        extra.append(("Attributes", json.dumps(meta.attributes, sort_keys=True)[:200]))
    rows = [
        ("Type", "chunkstore.Array"),
        ("Zarr format", str(array.zarr_format)),
        ("Name", array.name),
        ("Data type", dtype_name(array.dtype)),
        ("Shape", str(array.shape)),
        *([("Shard shape", shards_label(meta))] if array.layout.shards is not None else []),
        ("Chunk shape", chunks_label(meta)),
        ("Order", array.order),
        ("Read-only", str(array.read_only)),
        ("Fill value", str(array.fill_value)),
        ("Filters", str(array.filters)),
        ("Compressors", str(array.compressors)),
        ("Codecs", array_codec_chain(meta.to_json())),
        *extra,
        ("Store type", type(array.store).__name__),
        ("Store", repr(array.store)),
        ("No. bytes", f"{array.nbytes} ({human_bytes(array.nbytes)})"),
        ("No. bytes stored", f"{stored} ({human_bytes(stored)})"),
        ("Storage ratio", f"{array.nbytes / stored:.1f}" if stored else "-"),
        ("Chunks initialized", f"{array.nchunks_initialized}/{array.nchunks}"),
    ]
    return InfoTable(rows)
