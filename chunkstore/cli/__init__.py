"""The ``chunkstore`` command line (also ``python -m chunkstore``).

Commands: ``info``, ``tree``, ``ls``, ``attrs``, ``header``, ``dump``, ``copy``/``convert``,
``rechunk``, ``verify``, ``demo``; one module per command group, dispatched by
:func:`main`.
"""

from chunkstore.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
