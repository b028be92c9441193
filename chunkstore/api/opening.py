"""Opening nodes by mode, with zarr-python 3's names: ``open``, ``open_array``,
``open_group``, ``group``, ``create_group``, ``open_consolidated``, ``open_like``.

``mode``: "r" read-only, "r+" must exist, "a" read/write, create if missing, "w" create
(replacing what is there), "w-" create, fail if anything is there.
"""

from __future__ import annotations

from typing import Any

from chunkstore.array.array import Array
from chunkstore.errors import ArrayNotFoundError, NodeNotFoundError, NodeTypeError
from chunkstore.group.group import Group
from chunkstore.group.like_args import like_arguments
from chunkstore.group.members import array_options, new_array
from chunkstore.group.opening import check_mode
from chunkstore.io.cache import chunk_cache
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.nodes import NodeMetadata, is_array, parse_node, where_prefix
from chunkstore.nodes.paths import normalize_path
from chunkstore.nodes.reading import read_documents, try_read_node
from chunkstore.storage.base import Store
from chunkstore.storage.resolve import resolve_store


def open_array(store: Any = None, mode: str = "a", path: str | None = None, *,
               zarr_format: int | None = None, storage_options: dict | None = None,
               synchronizer: Any = None, write_empty_chunks: bool | None = None,
               allow_unsafe_codecs: bool = False, cache: Any = None,
               **create_kwargs: Any) -> Array:
    """Open (or, by mode, create) an array: "a" creates it when missing if ``shape`` is
    given; "w"/"w-" need ``shape`` (and the other ``create_array`` arguments).

    ``cache``: the decoded chunks kept between reads of this array: None follows
    ``chunkstore.config["cache.chunk_bytes"]`` (off by default); 0 or False, off; a byte
    budget (an int or a size such as ``"256MiB"``), a private LRU of that size; a
    ``chunkstore.io.cache.chunk_cache.ChunkCache``, shared (one budget) with every array given
    it. Writes through chunkstore invalidate the chunks they touch. Anything else is a
    ValueError naming ``cache``.

    >>> a = open_array(None, mode="w", shape=(8,), chunks=(4,), dtype="i4", cache="16MiB")
    >>> a[:] = 1
    >>> int(a[:].sum())
    8
    """
    check_mode(mode)
    cache = chunk_cache.from_argument(cache)  # checked before anything is opened
    st = resolve_store(store, mode=mode, storage_options=storage_options)
    path = normalize_path(path)
    node = None if mode in ("w", "w-") else try_read_node(st, path, zarr_format, kind="array")
    return _open_or_create(st, mode, path, node, zarr_format=zarr_format,
                           synchronizer=synchronizer, write_empty_chunks=write_empty_chunks,
                           allow_unsafe_codecs=allow_unsafe_codecs, cache=cache,
                           **create_kwargs)


def _open_or_create(st: Store, mode: str, path: str, node: NodeMetadata | None, *,
                    zarr_format: int | None = None, synchronizer: Any = None,
                    write_empty_chunks: bool | None = None, allow_unsafe_codecs: bool = False,
                    cache: Any = None, **create_kwargs: Any) -> Array:
    """open_array once the node at ``path`` has been read (in ``zarr_format``, or in both
    formats when it is None)."""
    opts = {"synchronizer": synchronizer, "allow_unsafe_codecs": allow_unsafe_codecs}
    if mode in ("w", "w-") or (mode == "a" and node is None and "shape" in create_kwargs):
        if "shape" not in create_kwargs:
            raise TypeError(f"creating an array at {path or '/'!r} needs a shape")
        if zarr_format is not None:
            create_kwargs["zarr_format"] = zarr_format
        checked = mode == "a" and zarr_format is None  # both formats were read: nothing there
        created = new_array(st, path, overwrite=mode == "w", checked=checked,
                            write_empty_chunks=write_empty_chunks, **opts, **create_kwargs)
        created._use_cache(cache)
        return created
    if node is None:
        raise ArrayNotFoundError(f"no array at path {path or '/'!r} in {st!r}")
    if not is_array(node):
        raise NodeTypeError(f"path {path or '/'!r} in {st!r} is a group, not an array")
    options = array_options(create_kwargs.get("config"), write_empty_chunks)
    return Array(st, path, node, read_only=mode == "r",  # type: ignore[arg-type]
                 config=options, cache=cache, **opts)


def open(store: Any = None, mode: str = "a", path: str | None = None, **kwargs: Any
         ) -> Array | Group:
    """Open the array or group at ``path``: an array if ``shape`` is given (created by
    mode), else whatever is there; "w" without ``shape`` makes a new group, "w-" refuses
    any node there (ContainsArrayError / ContainsGroupError).

    Its documents are read once (``zarr.json`` first; the v2 ones only if it is missing).
    ``cache``: an array's decoded-chunk cache (as ``open_array``; checked, and unused,
    when a group is opened).
    """
    check_mode(mode)
    if "cache" in kwargs:
        kwargs["cache"] = chunk_cache.from_argument(kwargs["cache"])
    st = resolve_store(store, mode=mode, storage_options=kwargs.pop("storage_options", None))
    path = normalize_path(path)
    if "shape" in kwargs:
        return open_array(st, mode, path, **kwargs)
    zarr_format = kwargs.get("zarr_format")
    group_kwargs = {k: kwargs[k] for k in ("zarr_format", "attributes", "use_consolidated",
                                           "synchronizer") if k in kwargs}
    if mode in ("w", "w-"):
        _refuse_group_config(kwargs, st, path)
        return Group._from_documents(st, mode, path, {}, **group_kwargs)
    extra = () if kwargs.get("use_consolidated") is False else (cons.V2_KEY,)
    docs = read_documents(st, [path], zarr_format, group_extra=extra)[path]
    node = parse_node(docs, where_prefix(st, path), zarr_format)
    if node is None and mode in ("r", "r+"):  # neither kind there: not "no group"
        what = f"Zarr v{zarr_format} array or group" if zarr_format else "Zarr array or group"
        raise NodeNotFoundError(f"nothing at path {path or '/'!r} in {st!r}: no {what} there")
    if node is not None and is_array(node):
        kwargs.pop("use_consolidated", None)
        return _open_or_create(st, mode, path, node, **kwargs)
    _refuse_group_config(kwargs, st, path)
    return Group._from_documents(st, mode, path, docs, **group_kwargs)


def _refuse_group_config(kwargs: dict[str, Any], st: Store, path: str) -> None:
    """TypeError for ``config=`` (an array's settings) where ``open`` opens or creates a
    group, before anything is written (as zarr-python)."""
    if kwargs.get("config") is not None:
        raise TypeError(f"config= holds an array's settings, but open of path "
                        f"{path or '/'!r} in {st!r} resolves to a group (pass shape= to "
                        "create an array)")


def open_group(store: Any = None, mode: str = "a", path: str | None = None, *,
               zarr_format: int | None = None, attributes: dict | None = None,
               storage_options: dict | None = None, use_consolidated: bool | None = None,
               synchronizer: Any = None) -> Group:
    """Open (or, by ``mode``, create) the group at ``path``.

    A v3 group costs one read (``zarr.json``); the v2 documents (``.zgroup``, ``.zattrs``
    and ``.zmetadata``, in one batch) are read only when ``zarr.json`` is missing or
    ``zarr_format=2``. When the group has consolidated metadata its members come from
    it with no further requests (``use_consolidated=False`` ignores it, ``True``
    requires it).
    """
    check_mode(mode)
    st = resolve_store(store, mode=mode, storage_options=storage_options)
    return Group._open_at(st, mode, normalize_path(path), zarr_format=zarr_format,
                          attributes=attributes, use_consolidated=use_consolidated,
                          synchronizer=synchronizer)


def group(store: Any = None, overwrite: bool = False, *, path: str | None = None,
          zarr_format: int | None = None, attributes: dict | None = None,
          storage_options: dict | None = None, synchronizer: Any = None) -> Group:
    """The group at ``path`` of ``store`` (memory when None), created if missing
    (``overwrite=True`` replaces whatever is there).

    >>> g = group()
    >>> g.create_group("bar").name
    '/bar'
    """
    return open_group(store, "w" if overwrite else "a", path, zarr_format=zarr_format,
                      attributes=attributes, storage_options=storage_options,
                      synchronizer=synchronizer)


def create_group(store: Any, *, path: str | None = None, zarr_format: int | None = None,
                 overwrite: bool = False, attributes: dict | None = None,
                 storage_options: dict | None = None) -> Group:
    """A new group at ``store``/``path``; an existing node there raises (ContainsGroupError
    or ContainsArrayError) unless ``overwrite=True``."""
    return open_group(store, "w" if overwrite else "w-", path, zarr_format=zarr_format,
                      attributes=attributes, storage_options=storage_options)


def open_consolidated(store: Any = None, mode: str = "a", path: str | None = None,
                      **kwargs: Any) -> Group:
    """``open_group`` that requires consolidated metadata (MetadataError without it)."""
    return open_group(store, mode, path, use_consolidated=True, **kwargs)


def open_like(a: Any, path: Any, *, zarr_format: int | None = None, **kwargs: Any) -> Array:
    """Open the array at ``path``, or create it (mode "a" unless ``mode`` says otherwise)
    like ``a``: its shape, dtype, chunks, fill value and, of an Array, the codecs a new
    array of ``zarr_format`` (default 3) can use; ``kwargs`` go to ``open_array`` and win.

    With ``store=``, ``path`` is the array's path in that store (zarr-python 3's
    ``open_like(a, path="x", store=s)``); without it, ``path`` names the store itself (a
    directory, ``.zip`` file or URL, as in zarr-python 2). As in zarr-python, the format
    of ``a`` is not inherited: an existing array of either format is opened."""
    like = like_arguments(a, {"zarr_format": zarr_format or 3}, keep_fill=True)
    del like["zarr_format"]
    kwargs = like | kwargs
    if kwargs.get("mode") is None:
        kwargs["mode"] = "a"
    if "store" in kwargs:
        return open_array(kwargs.pop("store"), path=path, zarr_format=zarr_format, **kwargs)
    return open_array(path, zarr_format=zarr_format, **kwargs)
