"""Read the size a zstd payload decodes to from its frame and block headers (RFC 8878).

numcodecs' zstd allocates what the frame header declares, or streams without limit
when the header declares nothing. Before calling it, :func:`decoded_size` walks the
frames of a payload — without decompressing anything — and returns either the exact
decoded size (every frame declares its content size) or an upper bound (from the
block headers: raw and RLE blocks state their size, a compressed block decodes to at
most ``min(window, 128 KiB)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from chunkstore.errors import ChunkDecodeError

_FRAME_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK, _SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50
_BLOCK_MAX = 128 * 1024
_FCS_BYTES = (0, 2, 4, 8)
_DICT_ID_BYTES = (0, 1, 2, 4)


@dataclass(frozen=True)
class ZstdSize:
    """What the headers say: ``nbytes`` exactly when ``exact``, else at most."""

    nbytes: int
    exact: bool


def _u(data: memoryview, pos: int, size: int) -> int:
    if pos + size > len(data):
        raise ChunkDecodeError(f"zstd: truncated frame ({len(data)} bytes)")
    return int.from_bytes(data[pos:pos + size], "little")


def _frame_header(data: memoryview, pos: int) -> tuple[int, int | None, int, bool]:
    """``(position of the first block, content size or None, window size, checksum?)``
    of the frame whose magic number is at ``pos``."""
    descriptor = _u(data, pos + 4, 1)
    if descriptor & 0x08:
        raise ChunkDecodeError("zstd: reserved bit set in a frame header")
    single_segment = bool(descriptor & 0x20)
    pos += 5
    window = 0
    if not single_segment:
        exponent_mantissa = _u(data, pos, 1)
        base = 1 << (10 + (exponent_mantissa >> 3))
        window = base + (base >> 3) * (exponent_mantissa & 7)
        pos += 1
    pos += _DICT_ID_BYTES[descriptor & 3]
    fcs_bytes = _FCS_BYTES[descriptor >> 6] or (1 if single_segment else 0)
    content: int | None = None
    if fcs_bytes:
        content = _u(data, pos, fcs_bytes) + (256 if fcs_bytes == 2 else 0)
        pos += fcs_bytes
    if single_segment:
        window = content or 0
    return pos, content, window, bool(descriptor & 0x04)


def _blocks(data: memoryview, pos: int, window: int, stop_above: int | None
            ) -> tuple[int, int]:
    """Walk the blocks of a frame from ``pos``: ``(position after the last block, upper
    bound of their decoded size)``; stops early once the bound exceeds ``stop_above``."""
    block_max = min(window, _BLOCK_MAX) if window else _BLOCK_MAX
    bound = 0
    while True:
        header = _u(data, pos, 3)
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        pos += 3
        if kind == 0:  # raw
            bound, pos = bound + size, pos + size
        elif kind == 1:  # RLE: one byte repeated `size` times
            bound, pos = bound + size, pos + 1
        elif kind == 2:  # compressed
            bound, pos = bound + block_max, pos + size
        else:
            raise ChunkDecodeError("zstd: reserved block type")
        if pos > len(data):
            raise ChunkDecodeError(f"zstd: truncated block ({len(data)} bytes)")
        if last or (stop_above is not None and bound > stop_above):
            return pos, bound


def decoded_size(data: object, stop_above: int) -> ZstdSize:
    """The decoded size of a zstd payload (one or more frames), read from its headers.

    The walk ends as soon as the size is known to exceed ``stop_above``: the result is
    then some value above it, enough for a caller to refuse the payload.
    """
    view = memoryview(data).cast("B")  # type: ignore[arg-type]
    pos, total, exact = 0, 0, True
    if len(view) < 4:
        raise ChunkDecodeError(f"zstd: a payload of {len(view)} bytes has no frame")
    while pos < len(view):
        magic = _u(view, pos, 4)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            pos += 8 + _u(view, pos + 4, 4)
            continue
        if magic != _FRAME_MAGIC:
            raise ChunkDecodeError(f"zstd: no frame magic number at byte {pos}")
        pos, content, window, checksum = _frame_header(view, pos)
        if content is None:
            exact = False
            pos, bound = _blocks(view, pos, window, stop_above - total)
            total += bound
        else:
            total += content
            if total > stop_above:
                return ZstdSize(total, exact)
            pos, _ = _blocks(view, pos, window, None)
        if total > stop_above:
            return ZstdSize(total, exact)
        pos += 4 if checksum else 0
        if pos > len(view):
            raise ChunkDecodeError(f"zstd: truncated frame checksum ({len(view)} bytes)")
    return ZstdSize(total, exact)
