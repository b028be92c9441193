"""ObstoreStore: S3 through ``obstore`` (the Rust ``object_store`` client), optional.

The default store of ``s3://`` URLs when ``obstore`` is installed (``pip install
obstore``, the ``obstore`` extra) and can express the ``storage_options`` (see
``s3_backend``: otherwise an FsspecStore serves them and says why);
``storage_options={"backend": "fsspec" | "obstore"}`` or the ``CHUNKSTORE_S3_BACKEND``
environment variable choose instead. It implements the contract of
FsspecStore on S3 with a fraction of the client CPU: requests are signed, sent and
parsed in Rust threads that do not hold the GIL, where s3fs + aiobotocore do all of it
in Python on one event-loop thread (signing, event hooks, botocore's response parsing
with dateutil timestamps, a CRC32 check of every body, new connections): reading 256
MiB of 1 MiB objects from the moto endpoint costs ~0.5 s of client CPU here against
~1.2 s with s3fs (tensorstore: ~0.6 s). Clients are shared per configuration within a
process, so opening an array again reuses open connections.

* Batched calls (``get_many``, ``get_ranges``, ``get_versioned_many``, ``set_many``,
  ``commit_many``) run concurrently, at most ``MAX_CONCURRENCY`` requests in flight, as
  obstore's blocking calls (which release the GIL) on one thread pool per process;
  single-key calls run in the calling thread. (Not obstore's async API: a process that
  used it may abort with SIGABRT in interpreter shutdown.)
* Generations are ETags (``s3_conditional.ETag``, as with FsspecStore), once a probe
  found the server honouring conditions (``s3_conditional.honoured``; else
  commits are unchecked, as on a store without compare-and-swap): conditional
  PUTs are ``If-Match: <etag>`` / ``If-None-Match: *`` (obstore's ``mode=`` "update" /
  "create"). object_store has no conditional DELETE: a checked delete is sent as a
  presigned ``DELETE`` URL (signed by obstore) with an ``If-Match`` header, so
  ``capabilities.conditional_delete`` holds where requests are signed (not with
  ``anon``/``skip_signature``, where the chunk engine writes the encoded fill chunk
  instead of deleting).
* Missing keys read as None; every other failure is a StoreError naming the key, the
  URL and the endpoint.

``storage_options`` take s3fs's spelling, so switching backends is one option:
``key``, ``secret``, ``token``, ``anon``, ``endpoint_url`` (also inside
``client_kwargs``), ``region_name`` (``client_kwargs``) or ``region``, and the parts of
``config_kwargs`` listed in ``obstore_options``; obstore's own settings go in ``config``
(S3Config keys), ``client_options`` and ``retry_config``. The
endpoint comes from the environment as for FsspecStore (``fsspec_setup``); an explicit
one wins over obstore's own variables (``obstore.options.effective_endpoint``).
``location()`` is canonical (``location``): an FsspecStore's on the same place. Pickling
sends ``(url, storage_options)``: a worker builds its own client. obstore is not
fork-safe (its tokio runtime's threads stay in the parent): a process forked after the
parent used the backend gets a StoreError saying so (not a hang); start workers with
``spawn`` or ``forkserver`` (Dask's default is ``spawn``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from chunkstore.errors import ChunkstoreError
from chunkstore.storage.base import (
    ABSENT,
    ANY,
    CHANGED,
    ByteRange,
    BytesLike,
    Commit,
    Store,
    normalize_prefix,
    validate_key,
    validate_prefix,
)
from chunkstore.storage.bounds import too_large, wrong_size
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.errors import InvalidStoreError, StoreError
from chunkstore.storage.fsspec.setup import protocols, with_endpoint
from chunkstore.storage.location import remote_location
from chunkstore.storage.obstore.listing import keys_below, names_in
from chunkstore.storage.obstore.options import translate_options
from chunkstore.storage.obstore.setup import (
    check_not_forked,
    client_for,
    is_conflict,
    is_missing,
    obstore_module,
    run_all,
)
from chunkstore.storage.obstore.writes import as_buffer, delete_if_match, put_mode
from chunkstore.storage.remote import RemoteStore
from chunkstore.storage.s3_conditional import (
    Conditions,
    ETag,
    ServerConditions,
    probe_conditions,
    probe_key,
)

#: what an ObstoreStore can do; the conditional fields are probed (``capabilities``)
_CAPABILITIES = Capabilities(
    partial_reads=True, zero_copy_views=False, request_cost_bytes=4096,
    conditional_writes=False, conditional_delete=False, conditional_writes_ignored=False,
    writes_arrays=False, reads_arrays=False, snapshot_ranges=False, remote=True,
    process_local=False,
    # not blocking commits: committing on every pool thread helped large writes little
    # (256 MiB: 77-90 against 66-80 MB/s, noisy) and made small ones 3x slower with
    # 20 ms per request (the pool's inline probe of small items ran the first commits
    # one after another)
    blocking_commits=False,
    write_batch_bytes=64 * 2**20,  # as FsspecStore
    cache_tokens=False, timestamped_tokens=False)


class ObstoreStore(RemoteStore):
    """A Store on an ``s3://bucket/prefix`` URL through obstore (see the module
    docstring). ``storage_options`` as for FsspecStore on S3."""

    #: which client serves the store (an FsspecStore that resolve_store chose for an
    #: s3:// URL says "fsspec", and why, see ``s3_backend``)
    backend = "obstore"
    kind = "ObstoreStore"

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None,
                 read_only: bool = False) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"ObstoreStore needs an s3:// URL, got {url!r}")
        obstore_module()
        super().__init__(read_only)
        self.url = url.rstrip("/")
        options = dict(storage_options or {})
        options.pop("backend", None)
        self.storage_options = with_endpoint(self.url, options)
        self._bucket, self._root, self._kwargs = translate_options(self.url, self.storage_options)
        signed = not self._kwargs["config"].get("skip_signature")
        #: conditional PUTs can be sent; whether the server honours them is probed before
        #: the first conditional commit (``capabilities``)
        self._conditional_requests = True
        #: a checked delete is a presigned DELETE with If-Match, which needs signing
        self._conditional_delete = bool(signed)
        self._server = ServerConditions(_CAPABILITIES, self._conditional_delete)
        self._store: Any = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    # -- identity (the rest: RemoteStore) ----------------------------------------------
    def location(self) -> Any:
        """As FsspecStore's on S3: ``("s3", "bucket/prefix", endpoint)``, canonical (see
        ``location``), so a copy between the two backends onto the same place is caught
        and a write through one invalidates cached chunks read through the other."""
        return remote_location(protocols(self.url)[0], self.root, self.endpoint)

    @property
    def endpoint(self) -> str | None:
        """The S3 endpoint the store talks to, when one is configured (see
        ``obstore.options.effective_endpoint``)."""
        return self._kwargs["config"].get("aws_endpoint_url_s3")

    @property
    def root(self) -> str:
        """``bucket/prefix`` (no protocol, no trailing slash), as FsspecStore's root."""
        return f"{self._bucket}/{self._root}".rstrip("/")

    def sibling(self, suffix: str) -> ObstoreStore | None:
        if not self._root:
            return None
        return ObstoreStore(self.url + suffix, self.storage_options)

    # -- conditions verified by a probe (capabilities: RemoteStore) -------------------------
    def _probe_conditions(self) -> Conditions:
        """Whether the S3 server honours conditional PUTs and DELETEs: a probe object at
        the root (``s3_conditional.probe_conditions``)."""
        key = probe_key()
        path = self._path(key)
        try:
            return probe_conditions(lambda body, generation: self._commit_one(
                (key, path, body, generation)), lambda: self._delete([key]),
                self._conditional_delete)
        except ChunkstoreError:
            raise
        except Exception as e:
            raise self._failure("probing conditional writes with", [key], e) from e

    # -- the client -------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The obstore S3Store (created on first use, and again after a fork)."""
        if self._store is None or self._pid != os.getpid():
            check_not_forked(self._where())
            with self._lock:
                if self._store is None or self._pid != os.getpid():
                    try:
                        self._store = client_for(self._bucket, self._kwargs)
                    except Exception as e:
                        raise InvalidStoreError(f"{self._where()}: cannot configure the "
                                                f"obstore client: {e}") from None
                    self._pid = os.getpid()
        return self._store

    def _failure(self, action: str, keys: Sequence[str], error: BaseException) -> StoreError:
        shown = repr(keys[0]) + (f" and {len(keys) - 1} more" if len(keys) > 1 else "")
        message = str(error).strip().splitlines()
        detail = message[0] if message else ""
        return StoreError(f"{action} key {shown} of {self._where()} failed: "
                          f"{type(error).__name__}: {detail}")

    def _check(self, action: str, key: str, value: Any) -> Any:
        if isinstance(value, BaseException):
            if isinstance(value, ChunkstoreError):
                raise value
            raise self._failure(action, [key], value) from value
        return value

    def _path(self, key: str) -> str:
        validate_key(key)
        return f"{self._root}/{key}" if self._root else key

    # -- reads ------------------------------------------------------------------------
    # bounded reads: GETs whose metadata (the object's size) is checked before the body
    # is read (``_fetch``); ranged reads check the same, no request more
    def get(self, key: str, byte_range: ByteRange | None = None,
            max_bytes: int | None = None) -> bytes | None:
        path = self._path(key)
        if byte_range is None and max_bytes is not None:
            return self._check("reading", key, run_all(self._get_bounded,
                                                       [(key, path, max_bytes)])[0])
        if byte_range is not None:
            out = run_all(self._get_one_range, [(key, path, byte_range)])[0]
            return self._check("reading", key, out)
        try:
            return bytes(obstore_module().get(self.client, path).bytes())
        except Exception as e:
            if is_missing(e):
                return None
            raise self._failure("reading", [key], e) from e

    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        """All values fetched concurrently (missing keys -> None); one larger than
        ``max_bytes`` is an ObjectSizeError, its body not downloaded."""
        if not keys:
            return []
        if len(keys) == 1:
            return [self.get(keys[0], max_bytes=max_bytes)]
        if max_bytes is not None:
            out = run_all(self._get_bounded, [(k, self._path(k), max_bytes) for k in keys])
        else:
            out = run_all(self._get_whole, [self._path(k) for k in keys])
        return [self._check("reading", k, v) for k, v in zip(keys, out, strict=True)]

    def get_views(self, keys: Sequence[str], max_bytes: int | None = None
                  ) -> list[BytesLike | None]:
        """As ``get_many``, each value a read-only view of the buffer obstore received it
        in (``obstore.Bytes``): no copy of the body (``get_many`` copies each into
        ``bytes``, a second pass over every byte and new pages to fault in)."""
        if not keys:
            return []
        out = run_all(self._get_view, [(k, self._path(k), max_bytes) for k in keys])
        return [self._check("reading", k, v) for k, v in zip(keys, out, strict=True)]

    def _get_bounded(self, item: tuple[str, str, int]) -> bytes | None:
        found = self._fetch(*item)
        return None if found is None else found[0]

    def _get_view(self, item: tuple[str, str, int | None]) -> memoryview | None:
        found = self._fetch(*item, copy=False)
        return None if found is None else found[0]

    def _fetch(self, key: str, path: str, max_bytes: int | None, copy: bool = True
               ) -> tuple[Any, Any] | None:
        """Body (``bytes``, or a view of obstore's buffer when not ``copy``) and metadata
        (None: missing); with ``max_bytes``, the object's size (its Content-Length, which
        also bounds what the body can be) is checked before the body is read: a larger
        object's response is dropped unread. (A plain GET, not a range of ``max_bytes +
        1`` bytes: a server may copy the object to answer a range, moto does, ~0.4 ms
        per MiB, and an empty object has no range, a 416 and a HEAD more.)"""
        obs = obstore_module()
        try:
            result = obs.get(self.client, path)
        except Exception as e:
            if is_missing(e):
                return None
            raise
        size = int(result.meta["size"])
        if max_bytes is not None and size > max_bytes:
            raise too_large(self, key, size, max_bytes)
        body = result.bytes()
        return (bytes(body) if copy else memoryview(body)), result.meta

    def _get_whole(self, path: str) -> bytes | None:
        obs = obstore_module()
        try:
            result = obs.get(self.client, path)
            return bytes(result.bytes())
        except Exception as e:
            if is_missing(e):
                return None
            raise

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        """Byte ranges of several keys, fetched concurrently; with ``object_size``, a
        key holding another size is an ObjectSizeError (the size comes with each GET)."""
        if not requests:
            return []
        if len(requests) == 1 and object_size is None:
            return [self.get(*requests[0])]
        items = [(k, self._path(k), r) for k, r in requests]
        if object_size is None:
            out = run_all(self._get_one_range, items)
            return [self._check("reading", k, v)
                    for (k, _), v in zip(requests, out, strict=True)]
        found = [self._check("reading", k, v) for (k, _), v in
                 zip(requests, run_all(self._get_range_sized, items), strict=True)]
        for (key, _), (data, size) in zip(requests, found, strict=True):
            if data is not None and size is not None and size != object_size:
                raise wrong_size(self, key, size, object_size)
        return [data for data, _ in found]

    def get_versioned_ranges(self, requests: Sequence[tuple[str, ByteRange | None, Any]]
                             ) -> list[tuple[bytes | None, Any]]:
        """Byte ranges with their objects' ETags, fetched concurrently; a request pinned
        to an ETag is a GET with ``If-Match`` (412: ``(None, CHANGED)``; none to a server
        known to ignore conditions), and the ETag the answer carries is checked too."""
        for key, _, pinned in requests:
            if pinned is not ANY and not isinstance(pinned, ETag):
                raise ValueError(f"{self!r}: a read of {key!r} pinned to {pinned!r}, not "
                                 "an ETag")
        # a server known to ignore conditions is sent none: the ETags are checked here
        send = self._versioned_reads
        items = [(k, self._path(k), r, g, send) for k, r, g in requests]
        found = []
        for (key, _, _), value in zip(requests, run_all(self._get_range_tagged, items),
                                      strict=True):
            data, _, generation = self._check("reading", key, value)
            found.append((data, generation))
        return found

    def _get_one_range(self, item: tuple[str, str, ByteRange | None]) -> bytes | None:
        return self._get_range_sized(item)[0]

    def _get_range_sized(self, item: tuple[str, str, ByteRange | None]
                         ) -> tuple[bytes | None, int | None]:
        """The range's bytes and the object's size (None when missing or unknown)."""
        if item[2] is None:
            return self._get_whole(item[1]), None
        data, size, _ = self._get_range_tagged((*item, ANY, False))
        return data, size

    def _get_range_tagged(self, item: tuple[str, str, ByteRange | None, Any, bool]
                          ) -> tuple[bytes | None, int | None, Any]:
        """The range's bytes, the object's size and its generation (``ETag``; ``ANY``
        when the server sent none; ``ABSENT`` when missing); pinned to an ETag (not
        ``ANY``): ``(None, None, CHANGED)`` when the object is another one now (read
        with ``If-Match`` when the last item says so)."""
        _, path, byte_range, pinned, send = item
        obs = obstore_module()
        match = {"if_match": pinned.value} if send and pinned is not ANY else {}

        def tagged(data: bytes | None, meta: Any) -> tuple[bytes | None, int | None, Any]:
            if meta is None:
                generation = ABSENT
            else:
                generation = ETag(meta["e_tag"]) if meta.get("e_tag") else ANY
            if pinned is not ANY and generation != pinned:
                return None, None, CHANGED
            return data, (None if meta is None else int(meta["size"])), generation

        start, stop = (None, None) if byte_range is None else byte_range
        if start is not None and stop is not None and (stop <= start or start < 0):
            meta = self._head(path)
            return tagged(None if meta is None else b"", meta)
        start = 0 if start is None else start
        options = dict(match)
        if byte_range is not None:
            options["range"] = {"suffix": -start} if start < 0 else (
                {"offset": start} if stop is None else (start, stop))
        try:
            result = obs.get(self.client, path, options=options or None)
            return tagged(bytes(result.bytes()), result.meta)
        except Exception as e:
            if is_missing(e):
                return tagged(None, None)
            if pinned is not ANY and is_conflict(e):
                return None, None, CHANGED
            # S3 answers a range past the end with 416, and a suffix longer than the
            # object (or any range of an empty one) with the whole object: see its size
            meta = self._head(path)
            if meta is None:
                return tagged(None, None)
            size = int(meta["size"])
            if start >= 0 and start >= size:
                return tagged(b"", meta)
            if start < 0 and -start >= size:
                try:
                    result = obs.get(self.client, path, options=match or None)
                except Exception as again:
                    if is_missing(again):
                        return tagged(None, None)
                    if pinned is not ANY and is_conflict(again):
                        return None, None, CHANGED
                    raise
                return tagged(bytes(result.bytes()), result.meta)
            raise

    def _size(self, key: str) -> int | None:
        path = self._path(key)
        try:
            return int(obstore_module().head(self.client, path)["size"])
        except Exception as e:
            if is_missing(e):
                return None
            raise self._failure("reading", [key], e) from e

    def _size_of(self, path: str) -> int | None:
        meta = self._head(path)
        return None if meta is None else int(meta["size"])

    def _head(self, path: str) -> Any:
        try:
            return obstore_module().head(self.client, path)
        except Exception as e:
            if is_missing(e):
                return None
            raise

    # -- versioned reads and conditional commits --------------------------------------
    def get_versioned_many(self, keys: Sequence[str], max_bytes: int | None = None
                           ) -> list[tuple[bytes | None, Any]]:
        """Each body with its ETag (``(None, ABSENT)`` when missing), concurrently; one
        larger than ``max_bytes`` is an ObjectSizeError, its body not downloaded. On a
        server known to ignore conditions: plain values, generation ``ANY``."""
        if not self._versioned_reads:
            return Store.get_versioned_many(self, keys, max_bytes)
        out = run_all(self._get_versioned, [(k, self._path(k), max_bytes) for k in keys])
        return [self._check("reading", k, v) for k, v in zip(keys, out, strict=True)]

    def _get_versioned(self, item: tuple[str, str, int | None]) -> tuple[bytes | None, Any]:
        found = self._fetch(*item)
        if found is None:
            return None, ABSENT
        etag = found[1].get("e_tag")
        return found[0], (ETag(etag) if etag else ANY)

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        """Unconditional items as plain PUTs and one bulk DELETE, the others as one
        conditional request each; all concurrently."""
        items = list(items)
        if not items:
            return []
        for key, _, _ in items:
            self._check_writable(key)
        if not self._commits_checked([k for k, _, _ in items]):  # the server ignores them
            return Store.commit_many(self, items)
        deletes = [k for k, v, g in items if g is ANY and v is None]
        others = [(i, (k, self._path(k), None if v is None else as_buffer(v), g))
                  for i, (k, v, g) in enumerate(items) if not (g is ANY and v is None)]
        done = [True] * len(items)
        if deletes:
            self._delete(deletes)
        if others:
            try:
                out = run_all(self._commit_one, [item for _, item in others])
            finally:
                self._notify_written([k for _, (k, *_) in others])
            for (i, (key, *_)), result in zip(others, out, strict=True):
                done[i] = self._check("writing", key, result)
        return done

    def _commit_one(self, item: tuple[str, str, Any, Any]) -> bool:
        key, path, body, generation = item
        if body is None:  # a checked delete
            if generation is ABSENT:
                return self._size_of(path) is None
            if not isinstance(generation, ETag):
                return False
            return delete_if_match(self.client, path, generation)
        mode = put_mode(generation)
        if mode is None:
            return False
        try:
            obstore_module().put(self.client, path, body, mode=mode, use_multipart=False)
        except Exception as e:
            if mode != "overwrite" and is_conflict(e):
                return False
            raise
        return True

    # -- writes -----------------------------------------------------------------------
    def set(self, key: str, value: BytesLike) -> None:
        self._check_writable(key)
        path = self._path(key)
        try:
            obstore_module().put(self.client, path, as_buffer(value), use_multipart=False)
        except Exception as e:
            raise self._failure("writing", [key], e) from e
        finally:
            self._notify_written([key])

    def set_many(self, items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]]) -> None:
        """All values with concurrent PUTs (one atomic PUT per object)."""
        pairs = list(items.items() if isinstance(items, Mapping) else items)
        for key, _ in pairs:
            self._check_writable(key)
        if not pairs:
            return
        if len(pairs) == 1:
            self.set(*pairs[0])
            return
        todo = [(k, self._path(k), as_buffer(v), ANY) for k, v in pairs]
        try:
            out = run_all(self._commit_one, todo)
        finally:
            self._notify_written([k for k, _ in pairs])
        for (key, _), result in zip(pairs, out, strict=True):
            self._check("writing", key, result)

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            self._check_writable(key)
        if not keys:
            return
        paths = [self._path(k) for k in keys]
        try:
            obstore_module().delete(self.client, paths if len(paths) > 1 else paths[0])
        except Exception as e:
            if not is_missing(e):
                raise self._failure("deleting", keys, e) from e
        finally:
            self._notify_written(keys)

    # -- listing ----------------------------------------------------------------------
    def list_prefix(self, prefix: str) -> Iterator[str]:
        head, _, _ = validate_prefix(prefix).rpartition("/")
        start = self._path(head) if head else self._root
        try:
            batches = obstore_module().list(self.client, prefix=start or None).collect()
        except Exception as e:
            if is_missing(e):
                return iter(())
            raise self._failure("listing", [prefix], e) from e
        return iter(keys_below(self._root, batches, prefix))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        start = self._path(base.rstrip("/")) if base else self._root
        try:
            found = obstore_module().list_with_delimiter(self.client, prefix=start or None)
        except Exception as e:
            if is_missing(e):
                return iter(())
            raise self._failure("listing", [base], e) from e
        return iter(names_in(self._root, found, base))
