"""Byte sizes users write: ``"256MiB"``, ``"1GB"``, ``"64 kib"``, or a number of bytes.

The one parser for them, below every layer (no chunkstore imports), so the IO layer
(``cache=``) can use it as well as the Dask planner (``max_mem=``).

>>> parse_bytes("1GiB"), parse_bytes("512MB"), parse_bytes(4096)
(1073741824, 512000000, 4096)
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any

#: decimal (kB, MB, ...) and binary (KiB, MiB, ...) units, case-insensitive; none = bytes
UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
         "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_SIZE = re.compile(r"\s*([\d.]+)\s*([a-zA-Z]*)\s*")


def parse_bytes(value: int | float | str) -> int:
    """``"1GiB"`` -> 1073741824, ``"512MB"`` -> 512000000, numbers pass through (as int);
    ValueError for anything else."""
    if isinstance(value, int | float):
        return int(value)
    m = _SIZE.fullmatch(value)
    if not m or m.group(2).lower() not in UNITS:
        raise ValueError(f"cannot parse a byte size from {value!r}")
    try:
        number = float(m.group(1))
    except ValueError:  # "1.2.3"
        raise ValueError(f"cannot parse a byte size from {value!r}") from None
    return int(number * UNITS[m.group(2).lower()])


def whole_number(value: Any, what: str, *, sizes: bool = False, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``: an int (NumPy's too), an integral finite float,
    or with ``sizes`` a size string (``"256MiB"``); ValueError(``what``) for anything else
    (booleans included). The one check behind every count and byte budget users give."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(what)
    try:
        if isinstance(value, str):
            if not sizes:
                raise ValueError(what)
            n = parse_bytes(value)
        elif isinstance(value, float) or type(value).__name__.startswith("float"):
            if not (math.isfinite(value) and float(value).is_integer()):
                raise ValueError(what)
            n = int(value)
        else:  # int, NumPy integers: anything with __index__
            n = operator.index(value)
    except (ValueError, TypeError):
        raise ValueError(what) from None
    if n < minimum:
        raise ValueError(what)
    return n
