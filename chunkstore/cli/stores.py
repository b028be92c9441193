"""Opening what the user named: a clear one-line error, naming the path, when it is
missing, is not a Zarr store, needs a package that is not installed, or is corrupt."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from chunkstore.api.opening import open as open_any
from chunkstore.array.array import Array
from chunkstore.cli.errors import CLIError
from chunkstore.errors import NodeNotFoundError
from chunkstore.storage.obstore import setup as obstore_setup
from chunkstore.storage.s3_backend import is_plain_s3

#: what a store argument may be, for error messages
EXPECTED_STORE = "expected a Zarr store: a directory, a .zip archive or a URL"
#: what a path without Zarr metadata at its root is
NOT_A_STORE = "not a Zarr store (no zarr.json, .zarray or .zgroup at its root)"
#: the documents of which one at least is at the root of a Zarr store
ROOT_DOCUMENTS = ("zarr.json", ".zgroup", ".zarray", ".zattrs")
_FILE_KINDS = {
    ".npy": ("a NumPy .npy file", "; convert it with 'chunkstore convert FILE.npy OUT.zarr'"),
    ".h5": ("an HDF5 file", "; convert it with 'chunkstore convert FILE.h5 OUT.zarr --node DATASET'"),
    ".hdf5": ("an HDF5 file", "; convert it with 'chunkstore convert FILE.hdf5 OUT.zarr --node "
              "DATASET'"),
    ".json": ("a JSON file", "; give the directory that holds it"),
}


def is_url(path: str) -> bool:
    """Whether ``path`` is an fsspec URL (``s3://...``, ``zip::...``)."""
    return "://" in path or "::" in path


#: URL protocols whose data lives in the memory of the process (gone when it exits)
VOLATILE_PROTOCOLS = ("memory",)
#: what to install for s3:// URLs (the README's advice: obstore, the default client)
S3_INSTALL = "pip install 'chunkstore[obstore]', or 'chunkstore[s3]' for s3fs"


def volatile_warning(path: str) -> str | None:
    """Why writing to ``path`` keeps nothing (a ``memory://`` URL lives in this process
    only), or None."""
    if not is_url(path):
        return None
    protocols = [s.split("://", 1)[0] for s in path.split("::") if "://" in s]
    if any(p in VOLATILE_PROTOCOLS for p in protocols):
        return (f"{path} is in the memory of this command's process: what is written there "
                "is gone when the command exits (write to a directory, a .zip or an object "
                "store to keep it)")
    return None


def _check_protocols(url: str) -> None:
    """Each protocol of ``url`` (chained with ``::``) is known and its package installed
    (a plain ``s3://`` URL needs s3fs only when obstore, its default client, is not
    installed: ``storage.s3_backend``)."""
    import fsspec
    from fsspec.registry import known_implementations

    if is_plain_s3(url) and obstore_setup.available():
        return
    segments = url.split("::")
    for segment in segments:
        if "://" not in segment:
            continue
        protocol = segment.split("://", 1)[0]
        try:
            fsspec.get_filesystem_class(protocol)
        except ValueError:
            raise CLIError(f"{url}: unknown URL protocol {protocol!r} ({EXPECTED_STORE})") \
                from None
        except ImportError:
            if is_plain_s3(url):  # obstore (the default client) or s3fs would serve it
                raise CLIError(f"{url}: {protocol}:// URLs need an S3 client, and neither "
                               f"obstore nor s3fs is installed ({S3_INSTALL})") from None
            package = known_implementations.get(protocol, {}).get("class", protocol)
            package = package.split(".")[0]
            raise CLIError(f"{url}: {protocol}:// URLs need the package {package!r}, which is "
                           f"not installed (pip install {package})") from None
    if segments[0] == "zip" and len(segments) == 2 and not is_url(segments[1]):
        _check_local(segments[1], url)


def _check_local(path: str, shown: str) -> None:
    if not os.path.exists(path):
        raise CLIError(f"{shown}: no such file or directory ({EXPECTED_STORE})")
    if os.path.isdir(path):
        return
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".zip" or shown.startswith("zip::"):
        if not zipfile.is_zipfile(path):
            raise CLIError(f"{shown}: not a zip archive, or a truncated one (no end-of-archive "
                           "record)")
        return
    kind, hint = _FILE_KINDS.get(suffix, ("a file", ""))
    raise CLIError(f"{shown}: is {kind}, not a Zarr store ({EXPECTED_STORE}{hint})")


def check_location(path: str) -> None:
    """Fail early, naming ``path``, when it cannot be an existing Zarr store."""
    if is_url(path):
        _check_protocols(path)
    else:
        _check_local(path, path)


def check_target(path: str) -> None:
    """Fail early, naming ``path``, when a URL to write to needs a client that is not
    installed (what to install: the README's advice)."""
    if is_url(path):
        _check_protocols(path)


def check_store_root(path: str, store: Any) -> None:
    """Fail, naming ``path``, when the resolved ``store`` has no Zarr metadata document at
    its root (what ``open_node`` refuses as not a Zarr store)."""
    if not any(store.exists(name) for name in ROOT_DOCUMENTS):
        raise CLIError(f"{path}: {NOT_A_STORE}")


@contextmanager
def reading(path: str) -> Iterator[None]:
    """Errors raised while reading ``path`` that would not name it, named."""
    try:
        yield
    except RecursionError:
        raise CLIError(f"{path}: a metadata document is nested too deeply to be parsed") \
            from None
    except zipfile.BadZipFile as e:
        raise CLIError(f"{path}: not a valid zip archive (corrupt or truncated: {e})") from None


def where(path: str, node: str | None) -> str:
    """``path``, or ``path`` with the node inside it, for messages."""
    return f"{path} (node {node!r})" if node else path


def open_node(path: str, options: dict[str, Any] | None = None, node: str | None = None,
              kind: str = "node") -> Any:
    """The array or group at ``node`` of the store ``path``, read-only.

    ``kind``: "array", "group" or "node" (either); a node of the other kind is an error.
    """
    check_location(path)
    with reading(path):
        try:
            found = open_any(path, mode="r", path=node, storage_options=options)
        except NodeNotFoundError:
            if node and node.strip("/"):
                raise CLIError(f"{path}: no Zarr array or group at node {node!r}") from None
            raise CLIError(f"{path}: {NOT_A_STORE}") from None
    is_array = isinstance(found, Array)
    if kind == "array" and not is_array:
        raise CLIError(f"{where(path, node)}: is a group, not an array (pick an array with "
                       f"--node; 'chunkstore ls -r {path}' lists them)")
    if kind == "group" and is_array:
        raise CLIError(f"{where(path, node)}: is an array, not a group")
    return found
