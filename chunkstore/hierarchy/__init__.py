"""The hierarchy layer: node documents (the only code that reads and writes metadata
documents: ``zarr.json``, ``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``),
attributes, consolidated metadata kept current from any entry point, and groups.

Layering: ``documents``, ``consolidated``, ``attributes`` and ``paths`` sit below
``chunkstore.array`` (which uses them); ``group`` and ``group_create`` sit above it. This
``__init__`` imports nothing, so importing ``chunkstore.hierarchy.documents`` from
``array.py`` never pulls in ``group`` (which imports ``array``): no import cycle.
"""
