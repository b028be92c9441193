"""Versioned reads and conditional writes on S3 (s3fs), run concurrently on s3fs's loop.

A generation is the object's ETag, as returned by the GET that read its body. A commit
is one ``PutObject`` with ``If-Match: <etag>`` (``If-None-Match: *`` to create only if
missing), or one ``DeleteObject`` with ``If-Match``: S3 applies each atomically, and
answers 412 PreconditionFailed (or 409 ConditionalRequestConflict when a concurrent
conditional write won) when the object changed, which means "not applied". An
``If-Match`` on an object deleted meanwhile is answered 404: not applied either.

Verified, not assumed: some S3-compatible servers (older MinIO, gateways that strip the
headers) accept conditional requests and apply them unconditionally, so writers of one
object would silently undo each other's updates. Before an S3 store's first conditional
commit (:func:`honoured`), a probe object under its root is created with
``If-None-Match: *``, created again (which must be refused), overwritten with a stale
``If-Match`` (refused) and deleted with one (refused) before it is removed; the result
is kept per process, endpoint and bucket in :func:`conditional_probes`. A server that
fails it is written to without conditions, as a store without compare-and-swap: writers
sharing an object need a synchronizer (``io.rmw`` refuses a partial chunk write without
one), and a :class:`~chunkstore.errors.ConditionalWritesWarning` says so once.
"""

from __future__ import annotations

import functools
import threading
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chunkstore.errors import ConditionalWritesWarning
from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.storage.base import ABSENT, ANY
from chunkstore.storage.capabilities import Capabilities

#: S3 error codes and HTTP statuses that mean "the condition did not hold"
_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_CONFLICT_STATUS = {409, 412}
#: the start of a probe object's key (then a random hex name), at the store's root
PROBE_PREFIX = ".chunkstore-probe-"
#: an ETag no object has: a condition on it must be refused
_STALE = '"00000000000000000000000000000000"'


class ETag:
    """The generation of an S3 object: its ETag (quotes included, as S3 sends it)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"ETag({self.value})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ETag) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


@functools.cache
def conditional_requests_supported() -> bool:
    """Whether the installed botocore knows ``IfMatch``/``IfNoneMatch`` on PutObject and
    ``IfMatch`` on DeleteObject (botocore >= 1.36 or so); looked up once per process."""
    try:
        import botocore.session
        model = botocore.session.get_session().get_service_model("s3")
        put = model.operation_model("PutObject").input_shape.members
        delete = model.operation_model("DeleteObject").input_shape.members
    except Exception:  # no botocore, or no model: plain writes only
        return False
    return "IfMatch" in put and "IfNoneMatch" in put and "IfMatch" in delete


def is_conflict(error: BaseException) -> bool:
    """Whether ``error`` (as s3fs raises it, the botocore error as its cause) is S3
    refusing a condition: 412 or 409."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _CONFLICT_CODES or status in _CONFLICT_STATUS:
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def get_versioned(fs: Any, paths: Sequence[str]) -> list[Any]:
    """``(body, ETag)`` per path (``(None, ABSENT)`` when missing), or the exception
    raised for it, fetched concurrently."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str) -> tuple[bytes | None, Any]:
        bucket, key, _ = fs.split_path(path)
        try:
            response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None, ABSENT
        body = response["Body"]
        try:
            data = await body.read()
        finally:
            body.close()
        return data, ETag(response["ETag"])

    return sync(fs.loop, _run_coros_in_chunks, [one(p) for p in paths],
                batch_size=fs.batch_size, return_exceptions=True)


def commit(fs: Any, items: Sequence[tuple[str, bytes | None, Any]]) -> list[Any]:
    """Apply ``(path, body or None, generation)`` items concurrently; per item True
    (applied), False (the condition did not hold) or the exception raised."""
    from fsspec.asyn import _run_coros_in_chunks, sync

    async def one(path: str, body: bytes | None, generation: Any) -> bool:
        bucket, key, _ = fs.split_path(path)
        condition: dict[str, str] = {}
        if generation is ABSENT:
            if body is None:  # delete "only if missing": true iff it is missing
                try:
                    await fs._call_s3("head_object", Bucket=bucket, Key=key)
                except FileNotFoundError:
                    return True
                return False
            condition["IfNoneMatch"] = "*"
        elif generation is not ANY:
            if not isinstance(generation, ETag):
                return False
            condition["IfMatch"] = generation.value
        try:
            if body is None:
                await fs._call_s3("delete_object", Bucket=bucket, Key=key, **condition)
            else:
                await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=body,
                                  **condition)
        except FileNotFoundError:
            if not condition:
                return True  # an unconditional delete of a missing object
            return False  # If-Match on an object that is gone
        except (FileExistsError, OSError) as e:
            if condition and (isinstance(e, FileExistsError) or is_conflict(e)):
                return False
            raise
        return True

    return sync(fs.loop, _run_coros_in_chunks, [one(*item) for item in items],
                batch_size=fs.batch_size, return_exceptions=True)


# -- verifying that the server honours conditions -------------------------------------------
@dataclass(frozen=True, slots=True)
class Conditions:
    """What an S3 server was found to honour: conditional PUTs (``If-None-Match: *`` and
    ``If-Match``) and conditional DELETEs (``If-Match``)."""

    writes: bool
    deletes: bool


#: what a read-only store reports before any probe: what the client can send
_ASSUMED = Conditions(True, True)


def is_not_implemented(error: BaseException) -> bool:
    """Whether ``error`` is a server answering 501 NotImplemented (a server that does not
    know conditional requests may refuse them so)."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict) and (
                response.get("Error", {}).get("Code") == "NotImplemented"
                or response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 501):
            return True
        if getattr(seen, "code", None) == 501 or "NotImplemented" in str(seen) or (
                "501 Not Implemented" in str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def probe_conditions(commit_one: Callable[[bytes | None, Any], bool],
                     remove: Callable[[], None], deletes: bool) -> Conditions:
    """Probe a server through ``commit_one(body or None, generation)`` (a store's
    conditional commit of the probe object: True applied, False refused) and
    ``remove()`` (its unconditional delete, always run at the end). ``deletes``: whether
    the client can send a conditional DELETE at all."""

    def refused(body: bytes | None, generation: Any) -> bool:
        try:
            return commit_one(body, generation) is False
        except Exception as e:
            if is_not_implemented(e):
                return False  # not applied, but not a condition checked either
            raise

    try:
        try:
            created = commit_one(b"1", ABSENT) is True
        except Exception as e:
            if is_not_implemented(e):
                return Conditions(False, False)
            raise
        writes = (created and refused(b"2", ABSENT) and refused(b"3", ETag(_STALE)))
        found = Conditions(writes, writes and deletes and refused(None, ETag(_STALE)))
    except BaseException:
        try:
            remove()
        except Exception:  # noqa: BLE001 (the first failure is the one to report)
            pass
        raise
    remove()
    return found


def probe_key() -> str:
    """A fresh probe object's key (unique: concurrent probes never meet)."""
    return f"{PROBE_PREFIX}{uuid.uuid4().hex}"


class ConditionalProbes(Part):
    """The one registry of probe results of a process: per ``(endpoint, bucket)``, the
    :class:`Conditions` its server honours. Both S3 backends share it (the answer is the
    server's, not the client's: obstore's client object cannot carry it), so each server
    is probed at most once per process (a part of the process's Runtime). One probe runs
    at a time; a fork starts the child with the parent's results and a fresh lock."""

    def __init__(self) -> None:
        self._results: dict[tuple[Any, ...], Conditions] = {}
        self._lock = threading.Lock()

    def forked(self) -> ConditionalProbes:
        """A forked child's: the parent's results, a fresh lock."""
        child = ConditionalProbes()
        child._results = dict(self._results)
        return child

    def known(self, key: tuple[Any, ...]) -> Conditions | None:
        """The result for ``key`` if it was probed in this process, else None."""
        return self._results.get(key)

    def get(self, key: tuple[Any, ...], probe: Callable[[], Conditions],
            where: str) -> Conditions:
        """The result for ``key``, probing with ``probe()`` the first time (a failure
        raises and is not kept: the next call probes again). A server found not to honour
        conditional writes is reported once with a ConditionalWritesWarning naming
        ``where``."""
        found = self._results.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._results.get(key)
            if found is None:
                found = self._results[key] = probe()
                if not found.writes:
                    warnings.warn(ConditionalWritesWarning(
                        f"{where}: the S3 server does not honour conditional writes (a "
                        "probe's PUT with If-None-Match: * or a stale If-Match was not "
                        "refused): chunkstore writes there without checks, so writers "
                        "of one chunk, shard or metadata document need a synchronizer "
                        "(chunkstore.ThreadSynchronizer() for threads of one process, "
                        "chunkstore.ProcessSynchronizer(lock_dir) for several); a partial "
                        "chunk write without one is refused"), stacklevel=2)
        return found


def conditional_probes() -> ConditionalProbes:
    """The probe results of this process (see ConditionalProbes)."""
    return current().part(ConditionalProbes)


def probe_location(location: tuple[Any, ...]) -> tuple[Any, ...]:
    """``(endpoint, bucket)`` of an S3 store's canonical ``location()`` (``("s3",
    "bucket/prefix", endpoint)``): the key of :func:`conditional_probes`."""
    return (location[2], location[1].split("/", 1)[0])


def honoured(key: tuple[Any, ...], read_only: bool, probe: Callable[[], Conditions],
             where: str) -> Conditions:
    """What the server at ``key`` (:func:`probe_location`) honours: probed with
    ``probe()`` the first time in this process (see :class:`ConditionalProbes`). A
    read-only store never probes: it gets what is known in this process, else what the
    client can send."""
    if read_only:
        return conditional_probes().known(key) or _ASSUMED
    return conditional_probes().get(key, probe, where)


def versioned_reads(key: tuple[Any, ...]) -> bool:
    """Whether versioned reads of a store that can send conditions return ETags: unless
    the server at ``key`` is already known to ignore conditions (reads never probe: an
    ETag is a true generation anyway, and commits decide whether to use it)."""
    known = conditional_probes().known(key)
    return known is None or known.writes


class ServerConditions:
    """One S3 store's view of the conditions its server honours (both S3 backends own
    one): its ``capabilities`` with the conditional fields as probed (:func:`honoured`),
    and whether its versioned reads return ETags (:func:`versioned_reads`).

    ``base``: the store's capabilities but the conditional fields; ``conditional_delete``:
    whether its client can send a conditional DELETE. Each call is given the store's
    ``location`` method (its canonical ``location()``), called once: the probe key never
    changes."""

    def __init__(self, base: Capabilities, conditional_delete: bool) -> None:
        self.base, self.conditional_delete = base, conditional_delete
        self._key: tuple[Any, ...] | None = None
        # asked several times per array read: built again only when what is known changed
        self._built: tuple[Conditions, Capabilities] | None = None

    def key(self, location: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
        """The store's :func:`probe_location`."""
        if self._key is None:
            self._key = probe_location(location())
        return self._key

    def capabilities(self, location: Callable[[], tuple[Any, ...]], read_only: bool,
                     probe: Callable[[], Conditions], where: str) -> Capabilities:
        """``base`` with what the server was found to honour (probed with ``probe()``
        once per process and server, unless ``read_only``: see :func:`honoured`)."""
        found = honoured(self.key(location), read_only, probe, where)
        built = self._built
        if built is None or built[0] is not found:
            built = self._built = (found, replace(
                self.base, conditional_writes=found.writes,
                conditional_delete=self.conditional_delete and found.deletes,
                conditional_writes_ignored=not found.writes))
        return built[1]

    def versioned_reads(self, location: Callable[[], tuple[Any, ...]]) -> bool:
        """Whether versioned reads return ETags (see :func:`versioned_reads`)."""
        return versioned_reads(self.key(location))
