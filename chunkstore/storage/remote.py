"""What the stores named by a URL share (FsspecStore, ObstoreStore): identity by URL and
storage options, read-only views on the same client, failures that name the endpoint,
the conditions the S3 server was found to honour (probed once per process and bucket,
``s3_conditional.ServerConditions``), and the calls that each makes of its ``_size``
and ``_delete`` alike (``exists``, ``getsize``, ``delete``, ``delete_many``,
``delete_prefix``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from chunkstore.storage.base import Store, normalize_prefix
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.errors import StoreError
from chunkstore.storage.s3_conditional import Conditions, ServerConditions


class RemoteStore(Store):
    """A Store on ``url`` with ``storage_options``; a subclass sets ``url``,
    ``storage_options``, ``_server`` and ``_conditional_requests`` and defines
    ``endpoint``, ``_probe_conditions``, ``_size`` and ``_delete``."""

    #: the name in the repr, and the family of stores that compare equal on the same URL
    #: and options (a subclass that only says why a client was chosen is the same store)
    kind: ClassVar[str]

    url: str
    storage_options: dict[str, Any]
    _server: ServerConditions
    #: the client can send conditional requests; whether the server honours them is
    #: probed before the first conditional commit (``capabilities``)
    _conditional_requests: bool

    # -- identity -------------------------------------------------------------------------
    def _description(self) -> tuple[Any, ...]:
        return (self.url, self.storage_options, self._read_only)

    def __repr__(self) -> str:
        return f"{self.kind}({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RemoteStore) and other.kind == self.kind
                and other.url == self.url and other.storage_options == self.storage_options)

    def __hash__(self) -> int:
        return hash((self.kind, self.url))

    @property
    def endpoint(self) -> str | None:
        """The S3 endpoint the store talks to, when one is configured."""
        raise NotImplementedError

    def _where(self) -> str:
        endpoint = self.endpoint
        return f"{self.url} (endpoint {endpoint})" if endpoint else self.url

    def _failure(self, action: str, keys: Sequence[str], error: BaseException) -> Exception:
        """The StoreError of ``action`` on ``keys`` failing with ``error``, naming the
        first key, the URL and the endpoint."""
        shown = repr(keys[0]) + (f" and {len(keys) - 1} more" if len(keys) > 1 else "")
        return StoreError(f"{action} key {shown} of {self._where()} failed: "
                          f"{type(error).__name__}: {error}")

    def with_read_only(self, read_only: bool = True) -> RemoteStore:
        """A view with the flag on the same client (and of the same class)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._read_only = bool(read_only)
        return clone

    # -- the server's conditions ----------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """What the store can do; conditional commits are what the server was found to
        honour: probed once per process and bucket, before a writable store's first use
        of them (``s3_conditional.honoured``). A client that sends no conditions (fsspec
        on anything but S3) has none."""
        if not self._conditional_requests:
            return self._server.base
        return self._server.capabilities(self.location, self.read_only,
                                         self._probe_conditions, self._where())

    def _commits_checked(self, keys: Sequence[str]) -> bool:
        """``capabilities.conditional_writes`` before committing ``keys``: a failed probe
        (e.g. an unreachable endpoint) is reported as a failure to write them."""
        try:
            return self.capabilities.conditional_writes
        except Exception as e:
            raise self._failure("writing", keys, e) from e

    @property
    def _versioned_reads(self) -> bool:
        """Whether versioned reads return ETags (``s3_conditional.versioned_reads``)."""
        return self._conditional_requests and self._server.versioned_reads(self.location)

    def _probe_conditions(self) -> Conditions:
        """Whether the S3 server honours conditional PUTs and DELETEs (a probe object at
        the root, ``s3_conditional.probe_conditions``)."""
        raise NotImplementedError

    # -- sizes and deletes, through the subclass's _size and _delete --------------------
    def _size(self, key: str) -> int | None:
        """The size of the object at ``key`` (None when missing): one HEAD on S3."""
        raise NotImplementedError

    def _delete(self, keys: list[str]) -> None:
        """Delete ``keys`` as one batch (missing keys ignored), reporting the write."""
        raise NotImplementedError

    def exists(self, key: str) -> bool:
        return self._size(key) is not None

    def getsize(self, key: str) -> int | None:
        return self._size(key)

    def delete(self, key: str) -> None:
        self._delete([key])

    def delete_many(self, keys: Iterable[str]) -> None:
        """One batched delete (S3: a bulk DELETE per 1000 keys); missing keys are
        ignored."""
        self._delete(list(keys))

    def delete_prefix(self, prefix: str) -> None:
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        self._delete(list(self.list_prefix(base)))
