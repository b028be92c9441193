"""Byte sizes users write: ``"256MiB"``, ``"1GB"``, ``"64 kib"``, or a number of bytes.

The one parser for them, below every layer (no chunkstore imports), so the IO layer
(``cache=``) can use it as well as the Dask planner (``max_mem=``).

>>> parse_bytes("1GiB"), parse_bytes("512MB"), parse_bytes(4096)
(1073741824, 512000000, 4096)
>>> format_bytes(512000000), format_bytes(2**28), format_bytes(500_000_123)
('512 MB', '256 MiB', '476.8 MiB')

One convention, dask's: kB, MB, GB, TB are powers of 1000, KiB, MiB, GiB, TiB powers of 1024.
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
#: "64MB", "1 GiB", "200kb", "1.5G": what a memory size (with its unit) looks like
_BYTE_SIZE = re.compile(r"\s*\d+(\.\d*)?\s*([kmgtpe]i?b?|b)\s*", re.IGNORECASE)


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


def looks_like_byte_size(text: str) -> bool:
    """Whether ``text`` reads as a memory size with its unit (``"64MB"``, ``"1GiB"``,
    ``"200KB"``): a store path or a path in a store that does was likely meant as a
    ``max_mem=`` given in the wrong place."""
    return _BYTE_SIZE.fullmatch(text) is not None


#: the units :func:`format_bytes` writes, largest first within each family
_DECIMAL = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3))
_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _exact(n: int, unit: int) -> str | None:
    """``n / unit`` written with at most two decimals, if that is exact and from 1 to 1023
    (a number people write: not ``145372 KiB``)."""
    if n < unit or n >= 1024 * unit or (n * 100) % unit:
        return None
    return f"{n / unit:.2f}".rstrip("0").rstrip(".")


def format_bytes(n: int | float) -> str:
    """A byte count for people: a size that is a round number of a decimal or a binary
    unit is written in it, as users write it (``512000000`` -> ``'512 MB'``,
    ``1610612736`` -> ``'1.5 GiB'``); any other in binary units with one decimal, as
    dask's ``format_bytes`` (``'476.8 MiB'``); below 1 KiB, in bytes (``'100 B'``).

    >>> format_bytes(4096), format_bytes(10**9), format_bytes(1234567), format_bytes(999)
    ('4 KiB', '1 GB', '1.2 MiB', '999 B')
    """
    if isinstance(n, float) and not n.is_integer():
        n = round(n)
    n = int(n)
    if n < 0:
        return "-" + format_bytes(-n)
    exact = [(len(text.partition(".")[2]), float(text), f"{text} {name}")
             for name, unit in _DECIMAL + _BINARY if (text := _exact(n, unit)) is not None]
    if exact:  # the fewest decimals, then the smallest number: 64 kB, not 62.5 KiB
        return min(exact)[2]
    for name, unit in _BINARY:
        if n >= unit:
            return f"{n / unit:.1f} {name}"
    return f"{n} B"


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
