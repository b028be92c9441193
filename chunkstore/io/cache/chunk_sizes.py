"""How many bytes a decoded chunk keeps alive beyond its element slots (the chunk
cache's budget counts them)."""

from __future__ import annotations

import sys

import numpy as np


def contents_nbytes(chunk: np.ndarray) -> int:
    """Bytes ``chunk`` holds outside its element slots (``nbytes``), an upper bound.
    StringDType (kind "T"): the UTF-8 bytes of each string too long for its slot (up to
    ``itemsize - 1`` bytes fit), plus an 8-byte header each and a quarter for the slack of
    NumPy's string arena (measured: at most 1/4). Object (kind "O"): ``sys.getsizeof``
    of each element (an object held twice counts twice). Other dtypes: 0. One pass over
    the elements, as decoding took; ASCII strings are measured without encoding them."""
    kind = chunk.dtype.kind
    if kind not in "TO" or not chunk.size:
        return 0
    items = chunk.ravel().tolist()
    if kind == "O":
        return sum(map(sys.getsizeof, items))
    try:  # str only (no NA object): a str's ASCII flag is known without a scan
        lengths = list(map(len, items))
        if not all(map(str.isascii, items)):
            lengths = [len(s.encode("utf-8", "surrogatepass")) for s in items]
    except TypeError:  # a StringDType with an NA object: it has no bytes of its own
        lengths = [len(s.encode("utf-8", "surrogatepass")) if isinstance(s, str) else 0
                   for s in items]
    sizes = np.asarray(lengths, dtype=np.int64)
    outside = sizes[sizes >= chunk.dtype.itemsize]
    return (int(outside.sum()) + 8 * outside.size) * 5 // 4
