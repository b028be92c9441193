"""The hierarchy layer: node documents (the only code that reads and writes metadata
documents: ``zarr.json``, ``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``),
attributes, consolidated metadata kept current from any entry point, and groups.

Consolidated copies: ``consolidated`` (reading, consolidating, and the mark / commit /
settle protocol that keeps every copy above a changed node current and crash-safe),
``pending`` (the marks of changes under way), ``copy_docs`` (a stored copy parsed only as
far as an update needs) and ``enclosing`` (copies held by groups above a LocalStore's
root, e.g. for a member opened through its own directory).

Layering: ``documents``, ``consolidated``, ``attributes`` and ``paths`` sit below
``chunkstore.array`` (which uses them); ``group`` and ``group_create`` sit above it. This
``__init__`` imports nothing, so importing ``chunkstore.hierarchy.documents`` from
``array.py`` never pulls in ``group`` (which imports ``array``): no import cycle.
"""
