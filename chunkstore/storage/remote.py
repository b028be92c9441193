"""What the stores named by a URL share (FsspecStore, ObstoreStore): identity by URL and
storage options, read-only views on the same client, failures that name the endpoint,
and the conditions the S3 server was found to honour (probed once per process and
bucket, ``s3_conditional.ServerConditions``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from chunkstore.storage.base import Store
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.s3_conditional import Conditions, ServerConditions


class RemoteStore(Store):
    """A Store on ``url`` with ``storage_options``; a subclass sets ``url``,
    ``storage_options`` and ``_server`` and defines ``endpoint``, ``_failure`` and
    ``_probe_conditions``."""

    #: the name in the repr, and the family of stores that compare equal on the same URL
    #: and options (a subclass that only says why a client was chosen is the same store)
    kind: ClassVar[str]

    url: str
    storage_options: dict[str, Any]
    _server: ServerConditions

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
        raise NotImplementedError

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
        of them (``s3_conditional.honoured``)."""
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
        return self._server.versioned_reads(self.location)

    def _probe_conditions(self) -> Conditions:
        """Whether the S3 server honours conditional PUTs and DELETEs (a probe object at
        the root, ``s3_conditional.probe_conditions``)."""
        raise NotImplementedError
