"""The outline of a raw JSON document, measured before it is parsed: how many values it
may hold and how deep it nests, in linear time and a few MiB of scratch memory whatever
its size (NumPy over fixed-size blocks of the bytes; no Python object per element).

Brackets and commas inside strings do not count: a quote is a string delimiter unless
an odd run of backslashes precedes it. The counts are exact for valid JSON; for
malformed bytes they are whatever the bytes say, and the parser refuses them next.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

_QUOTE, _BACKSLASH, _COMMA, _COLON = 0x22, 0x5C, 0x2C, 0x3A
_OPEN_BRACE, _CLOSE_BRACE = 0x7B, 0x7D
#: bytes scanned at once: bounds the scratch arrays (about 20 bytes per byte scanned)
BLOCK = 1 << 19



@dataclass(frozen=True)
class Outline:
    """What :func:`outline` found."""

    #: an upper bound of the JSON values the document holds: every object and array,
    #: plus one per comma-separated item (an empty object or array counts twice)
    values: int
    #: byte offset where nesting first went past ``max_depth``; -1 if it never did
    too_deep_at: int = -1
    #: the top-level field being scanned at ``too_deep_at`` (None: not in an object)
    field: str | None = None


def cheap_bounds(data: bytes) -> tuple[int, int]:
    """``(values, openers)`` counted over every byte, strings included (C speed, no
    allocation): upper bounds of what :func:`outline` reports, enough to skip it for
    most documents."""
    openers = data.count(b"{") + data.count(b"[")
    return openers + data.count(b",") + 1, openers


def as_utf8(raw: bytes | bytearray | memoryview | str) -> bytes:
    """The document's bytes in UTF-8 (what ``json.loads`` accepts: UTF-8, -16 or -32)."""
    if isinstance(raw, str):
        return raw.encode("utf-8", "surrogatepass")
    data = bytes(raw)
    encoding = json.detect_encoding(data)
    if encoding in ("utf-8", "utf-8-sig"):
        return data
    return data.decode(encoding).encode("utf-8", "surrogatepass")


class _State:
    """What one block passes to the next."""

    def __init__(self) -> None:
        self.in_string = False
        self.backslashes = 0  # the run of backslashes ending the previous block
        self.depth = 0
        self.openers = 0
        self.commas = 0
        self.last_colon = -1  # offset of the last ':' of the top-level object


def _string_mask(b: np.ndarray, st: _State) -> np.ndarray | bool:
    """True where ``b`` is outside strings (the delimiting quotes count as inside), or
    a bool for the whole block. Updates the string state for the next block."""
    quotes = b == _QUOTE
    slashes = b == _BACKSLASH
    has_quotes = bool(quotes.any())
    carried, st.backslashes = st.backslashes, 0
    if slashes.any():
        # runs of backslashes [starts, ends); one that starts the block continues the
        # run that ended the previous one
        edges = np.diff(slashes.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        lengths = ends - starts
        if starts[0] == 0:
            lengths[0] += carried
            carried = 0
        if ends[-1] == b.size:
            st.backslashes = int(lengths[-1])
        if has_quotes:
            odd = ends[((lengths & 1) == 1) & (ends < b.size)]
            quotes[odd] = False  # a quote after an odd run of backslashes is escaped
    if carried % 2 and quotes[0]:
        quotes[0] = False
    if not has_quotes:
        return not st.in_string
    inside = (np.cumsum(quotes, dtype=np.uint8) & 1).astype(bool)  # wraps: parity kept
    if st.in_string:
        inside = ~inside
    st.in_string = bool(inside[-1])
    return ~inside


def outline(raw: bytes, max_depth: int, *, find_field: bool = False) -> Outline:
    """Count the values of ``raw`` (UTF-8 JSON) and find where it nests deeper than
    ``max_depth`` (the scan stops there). ``find_field``: also name the top-level field
    where that happens (more work per byte: ask only once it is known to)."""
    arr = np.frombuffer(raw, np.uint8)
    st = _State()
    for start in range(0, arr.size, BLOCK):
        b = arr[start:start + BLOCK]
        if b.size % 8:  # whole 8-byte words (spaces after the end)
            b = np.concatenate([b, np.full(8 - b.size % 8, 0x20, np.uint8)])
        outside = _string_mask(b, st)
        if outside is False:
            continue
        folded = b | 0x20  # "[" and "]" differ from "{" and "}" in this bit only
        opens = folded == _OPEN_BRACE
        closes = folded == _CLOSE_BRACE
        commas = b == _COMMA
        if outside is not True:
            opens &= outside
            closes &= outside
            commas &= outside
        st.commas += int(np.count_nonzero(commas))
        if find_field:
            st.openers += int(np.count_nonzero(opens))
            stop = _exact_levels(b, opens, closes, outside, start, max_depth, st)
        else:
            stop = _first_too_deep(opens, closes, max_depth, st)
        if stop >= 0:
            field = _key_before(raw, st.last_colon) if find_field else None
            return Outline(st.openers + st.commas + 1, start + stop, field)
    return Outline(st.openers + st.commas + 1)


_BYTE_SUM = np.uint64(0x0101010101010101)  # x * this >> 56: the sum of x's 8 bytes


def _word_sums(flags: np.ndarray) -> np.ndarray:
    """How many of each 8 bytes of ``flags`` (0/1) are set (a multiply per word)."""
    return (flags.view(np.uint64) * _BYTE_SUM) >> np.uint64(56)


def _first_too_deep(opens: np.ndarray, closes: np.ndarray, max_depth: int,
                    st: _State) -> int:
    """Offset in the block where the nesting level (``st.depth`` before it, +1 per
    opener, -1 per closer) first exceeds ``max_depth``, or -1; counts the openers and
    moves ``st.depth`` past the block. Per 8-byte word: the level can rise by its
    openers at most, so only the words starting within that of the limit are summed
    byte by byte."""
    ups = _word_sums(opens).view(np.int64)  # small counts: the same bits
    net = ups - _word_sums(closes).view(np.int64)
    after = np.cumsum(net)
    after += st.depth
    before = after - net
    risky = np.flatnonzero(before + ups > max_depth)
    for w in risky.tolist():
        level = int(before[w]) + np.cumsum(opens[8 * w:8 * w + 8].view(np.int8)
                                           - closes[8 * w:8 * w + 8].view(np.int8))
        over = np.flatnonzero(level > max_depth)
        if over.size:
            return 8 * w + int(over[0])
    st.openers += int(ups.sum())
    st.depth = int(after[-1])
    return -1


def _exact_levels(b: np.ndarray, opens: np.ndarray, closes: np.ndarray, outside: Any,
                  start: int, max_depth: int, st: _State) -> int:
    """:func:`_first_too_deep` with the level of every byte, to track the colons of the
    top-level object (``st.last_colon``) up to the overflow."""
    level = np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int32)
    level += st.depth
    over = np.flatnonzero(level > max_depth)
    stop = int(over[0]) if over.size else b.size
    colons = (b[:stop] == _COLON) & (level[:stop] == 1)
    if outside is not True:
        colons &= outside[:stop]
    found = np.flatnonzero(colons)
    if found.size:
        st.last_colon = start + int(found[-1])
    st.depth = int(level[-1])
    return stop if over.size else -1


def _key_before(raw: bytes, colon: int) -> str | None:
    """The object key that ends just before the ``:`` at offset ``colon``."""
    if colon < 0:
        return None
    end = raw.rfind(b'"', 0, colon)
    begin = raw.rfind(b'"', 0, end)
    while begin > 0 and _escaped(raw, begin):
        begin = raw.rfind(b'"', 0, begin)
    try:
        key = json.loads(raw[begin:end + 1])
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def _escaped(raw: bytes, pos: int) -> bool:
    """Whether the quote at ``pos`` is preceded by an odd run of backslashes."""
    n = 0
    while pos - n - 1 >= 0 and raw[pos - n - 1] == _BACKSLASH:
        n += 1
    return n % 2 == 1
