"""Exceptions raised by chunkstore.

Every exception carries a message that names the array/group path and the key or
metadata field concerned, so a failure in a large hierarchy can be traced. The warnings
chunkstore issues are here too.

zarr-python 3's names (``zarr.errors``) are here as well, so ``except`` clauses written
for zarr-python catch what chunkstore raises in the same case: ``ArrayNotFoundError`` /
``GroupNotFoundError`` (subclasses of ``NodeNotFoundError``, itself a ValueError as in
zarr-python and a FileNotFoundError), ``ContainsArrayError`` / ``ContainsGroupError``,
``ChunkNotFoundError``, ``BoundsCheckError`` (an IndexError), ``BaseZarrError`` (the
ValueError every one of them is) and aliases where one chunkstore class covers a zarr
one (``MetadataValidationError`` = ``MetadataError``, ``NodeTypeValidationError`` =
``NodeTypeError``, ``UnknownCodecError`` =
``PickleCodecDisabledError`` = ``CodecError``).
"""

from __future__ import annotations


class ChunkstoreError(Exception):
    """Base class of every chunkstore-specific exception."""


class InvalidKeyError(ChunkstoreError, ValueError):
    """A store key is malformed or would escape the store's root."""


class ReadOnlyError(ChunkstoreError, PermissionError, ValueError):
    """A write was attempted on a store or node opened read-only (a ValueError too, as
    zarr-python raises)."""


class MetadataError(ChunkstoreError, ValueError):
    """A metadata document is malformed, unsupported or inconsistent."""


class UnsupportedError(MetadataError):
    """A metadata document uses a feature chunkstore does not implement."""


class CodecError(ChunkstoreError, ValueError):
    """A codec is unknown, misconfigured, or refused for safety."""


class ChunkDecodeError(ChunkstoreError, ValueError):
    """A stored chunk could not be decoded (truncated, corrupt, wrong size)."""


class OutOfMemoryError(ChunkstoreError, MemoryError):
    """Something the metadata calls for (a shard index, a whole shard) cannot fit in
    memory: refused before it is allocated when it is larger than the machine's memory,
    else when the allocation fails. The message names the array and the bytes needed."""


class NodeNotFoundError(ChunkstoreError, FileNotFoundError, KeyError, ValueError):
    """No array or group exists at the requested path (a ValueError too, as zarr-python's
    ``NodeNotFoundError``)."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class ArrayNotFoundError(NodeNotFoundError):
    """No array exists at the requested path (zarr-python's name)."""


class GroupNotFoundError(NodeNotFoundError):
    """No group exists at the requested path (zarr-python's name)."""


class ContainsArrayError(ChunkstoreError, FileExistsError, ValueError):
    """An array already exists where a new node (or a group) was requested."""


class ContainsGroupError(ChunkstoreError, FileExistsError, ValueError):
    """A group already exists where a new node (or an array) was requested."""


class ChunkNotFoundError(ChunkstoreError, ValueError):
    """A chunk (or a shard) a read needs is not stored, and the array was opened with
    ``config={"read_missing_chunks": False}`` (zarr-python's name and base class)."""


class BoundsCheckError(IndexError):
    """An index outside an axis (zarr-python's name; an IndexError)."""


class NodeTypeError(ChunkstoreError, TypeError, ValueError):
    """The node at a path is of the other kind (a group opened as an array, ...); a
    ValueError too, as zarr-python's ``NodeTypeValidationError``."""


class ConcurrentWriteError(ChunkstoreError, RuntimeError):
    """A read-modify-write could not commit: other writers kept changing the object."""


class SynchronizerRequiredError(ChunkstoreError, RuntimeError):
    """A write that reads and rewrites a chunk or shard was refused: its store cannot
    check commits (an S3 server that ignores ``If-Match`` / ``If-None-Match``) and no
    synchronizer was given, so concurrent writers could undo each other's updates."""


class SameLocationError(ChunkstoreError, ValueError):
    """A copy, rechunk or transpose would write onto (or over) its own source."""


class SelfReadingValueError(SameLocationError):
    """A value written into an array was found to read that array only after some of its
    blocks were written (those cannot be undone)."""


class ExternalDataError(ChunkstoreError, ValueError):
    """An HDF5/netCDF source reads other files (external storage, an external link, a
    virtual dataset) that the caller did not allow (``allow_external``)."""


class StaleConsolidatedMetadataWarning(UserWarning):
    """A node changed, but a consolidated copy that lists it could not be updated: a
    consolidated open of that group shows the node's previous metadata until
    ``chunkstore.consolidate_metadata(<group>)`` is run again."""


class ConditionalWritesWarning(UserWarning):
    """An S3 server (endpoint and bucket) was found to ignore conditional requests
    (``If-None-Match: *`` / ``If-Match``): commits there are unchecked, and writers of
    one chunk, shard or metadata document need a synchronizer. Issued once per process,
    endpoint and bucket."""
# -- zarr-python 3's names (``zarr.errors``) for what chunkstore raises ------------------------
BaseZarrError = ValueError
"""Every zarr-python error is a ValueError: ``except BaseZarrError`` catches those
chunkstore raises in the same cases (and any other ValueError)."""
MetadataValidationError = MetadataError
NodeTypeValidationError = NodeTypeError
UnknownCodecError = CodecError
PickleCodecDisabledError = CodecError
