"""Node documents in a store: the only code that reads and writes ``zarr.json``,
``.zarray``, ``.zgroup``, ``.zattrs`` and ``.zmetadata``; attributes; paths; consolidated
metadata kept current from any entry point (mark / commit / settle); the metadata of a new
array from user arguments (``creation``); the ``info`` tables. Below ``array`` and ``group``."""
