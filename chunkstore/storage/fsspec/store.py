"""FsspecStore: any fsspec filesystem (S3, GCS, memory, local files, zip, ...).

Batched calls map onto fsspec's batched calls, which async filesystems (s3fs, gcsfs)
run concurrently on their own event loop: ``get_many`` is one ``fs.cat(paths,
on_error="return")``, ``get_ranges`` one ``fs.cat_ranges``, ``set_many`` one
``fs.pipe({...})`` (a sliding window of concurrent PUTs: ``writes.put``) and
``delete_many`` one ``fs.rm([...])`` (S3 bulk delete). No call makes one serial round
trip per key, and reads and writes never list.

Atomicity, per backend:

* S3 / GCS / Azure: one PUT per value; an object is replaced atomically (a reader
  sees the old or the new object, never a mix). ``set_many`` is not atomic as a whole.
* ``memory://``: a value is replaced by one dict assignment, atomically.
* ``file://``: the value is written to a temporary file in the same directory and
  renamed over the key. (``resolve_store`` and ``chunkstore.open`` turn ``file://`` URLs
  into a LocalStore, which also confines keys and commits conditionally.)
* archives read through fsspec (``zip::...``, ``tar::...``) are read-only: write a zip
  archive through its path (a ZipStore).
* other filesystems: whatever their ``pipe_file`` guarantees (often nothing).

Conditional commits (``capabilities.conditional_writes``) are real on S3 only (see
``s3_conditional``: ``If-Match`` / ``If-None-Match`` PUTs and ``If-Match`` DELETEs), and
only once a probe found the server honouring them; elsewhere ``commit_many`` writes
unchecked and writers of one object need a synchronizer.
Bounded reads (``max_bytes``) fetch at most ``max_bytes + 1`` bytes of each object, and
sizes checked against an ``object_size`` come with the GETs on S3 (``sized``).

Errors of the backend while reading or writing (an unreachable endpoint, a refused
request) become a StoreError naming the key, the URL and the endpoint; a URL whose
backend package is missing is a MissingBackendError naming the package at creation.

The filesystem is created lazily from ``(url, storage_options)``, which is also all
that pickling sends, so a forked or remote worker builds its own session and event
loop instead of inheriting the parent's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from chunkstore.errors import ChunkstoreError, InvalidKeyError, ReadOnlyError
from chunkstore.storage import s3_conditional
from chunkstore.storage.base import (
    ANY,
    ByteRange,
    BytesLike,
    Commit,
    Store,
    normalize_prefix,
    unversioned_ranges,
    validate_key,
    validate_prefix,
)
from chunkstore.storage.bounds import too_large, wrong_size
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.fsspec.calls import (
    GLOB_MAGIC,
    PASS_THROUGH,
    backend_errors,
    cat_kwargs,
    is_missing,
)
from chunkstore.storage.fsspec.listing import keys_below, names_in
from chunkstore.storage.fsspec.setup import (
    check_backends,
    explicit_endpoint,
    is_archive,
    make_filesystem,
    protocols,
    store_location,
    with_endpoint,
)
from chunkstore.storage.fsspec.sized import (
    is_invalid_range,
    is_s3,
    object_size,
    object_sizes,
    s3_cat_ranges_sized,
    s3_get_pinned,
    s3_get_versioned_bounded,
)
from chunkstore.storage.fsspec.writes import put, remove
from chunkstore.storage.remote import RemoteStore

#: what an FsspecStore can do; the conditional fields on S3 are probed (``capabilities``)
_CAPABILITIES = Capabilities(
    partial_reads=True, zero_copy_views=False, request_cost_bytes=4096,
    conditional_writes=False, conditional_delete=False, conditional_writes_ignored=False,
    writes_arrays=False, reads_arrays=False, snapshot_ranges=False, remote=True,
    process_local=False, blocking_commits=False,
    # encoded chunks wait in memory until sent: a few PUT windows, so writes stream
    write_batch_bytes=64 * 2**20, cache_tokens=False, timestamped_tokens=False)


class FsspecStore(RemoteStore):
    """A Store on an fsspec URL, e.g. ``"s3://bucket/data.zarr"`` or ``"memory://x"``.

    ``storage_options`` are passed to the filesystem (credentials, ``endpoint_url``
    inside ``client_kwargs`` for S3, ...). Use :meth:`from_filesystem` to wrap an
    existing filesystem object.

    >>> s = FsspecStore("memory://doc-example")
    >>> s.set("a/b", b"hello")
    >>> s.get_many(["a/b", "missing"])
    [b'hello', None]
    """

    kind = "FsspecStore"

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None,
                 read_only: bool = False) -> None:
        if not isinstance(url, str) or "://" not in url and "::" not in url:
            raise ValueError(f"FsspecStore needs a URL with a protocol (e.g. 's3://...'), "
                             f"got {url!r}")
        check_backends(url)
        chain = protocols(url)
        self._archive = is_archive(url)
        super().__init__(read_only or self._archive)
        self.url = url.rstrip("/") if not url.endswith("://") else url
        self.storage_options = with_endpoint(self.url, dict(storage_options or {}))
        conditional = len(chain) == 1 and chain[0] in ("s3", "s3a") and (
            s3_conditional.conditional_requests_supported())
        self._conditional_requests = conditional  # S3 only (see RemoteStore)
        self._server = s3_conditional.ServerConditions(_CAPABILITIES, conditional)
        self._fs: Any = None
        self._fs_pid: int | None = None
        self._root = ""
        self._lock = threading.Lock()

    @classmethod
    def from_filesystem(cls, fs: Any, path: str = "", read_only: bool = False) -> FsspecStore:
        """Wrap an existing fsspec filesystem ``fs`` at ``path`` (pickles as its URL and
        ``fs.storage_options``)."""
        root = fs._strip_protocol(path).rstrip("/") if path else ""
        store = cls(fs.unstrip_protocol(root), dict(fs.storage_options), read_only)
        store._fs, store._fs_pid, store._root = fs, os.getpid(), root
        return store

    @classmethod
    def from_url(cls, url: str, storage_options: dict[str, Any] | None = None,
                 read_only: bool = False, allowed_exceptions: Any = None) -> FsspecStore:
        """The store of ``url`` (zarr-python's ``FsspecStore.from_url``; the same as
        ``FsspecStore(url, storage_options, read_only)``). ``allowed_exceptions`` is
        accepted for its signature: a missing key always reads as None here, and other
        failures are StoreErrors naming the key."""
        return cls(url, storage_options, read_only)

    # -- identity (the rest: RemoteStore) ------------------------------------------------
    def location(self) -> Any:
        """``(protocol, root, endpoint)``, canonical, as an ObstoreStore's on the same
        bucket; ``("file", real path)`` for local files, as a LocalStore's
        (``setup.store_location``)."""
        return store_location(self.url, self.root, self.storage_options)

    @property
    def endpoint(self) -> str | None:
        """The S3 endpoint the store talks to, when one is configured."""
        return explicit_endpoint(self.storage_options)

    def _check_writable(self, key: str) -> None:
        if self._archive and self._read_only:
            raise ReadOnlyError(f"cannot write key {key!r}: {self.url} is read-only (archives "
                                "are read through fsspec; write a zip archive through its "
                                "path, which opens a ZipStore)")
        super()._check_writable(key)

    def sibling(self, suffix: str) -> FsspecStore | None:
        if not self.root:
            return None
        return FsspecStore(self.url + suffix, self.storage_options)

    def remove_root(self) -> None:
        try:
            self.fs.rmdir(self.root)
        except (OSError, NotImplementedError):
            pass
        finally:
            self._notify_written(prefix="")

    # -- conditions verified by a probe (S3; capabilities: RemoteStore) -------------------
    def _probe_conditions(self) -> s3_conditional.Conditions:
        """Whether the S3 server honours conditional PUTs and DELETEs: a probe object at
        the root (``s3_conditional.probe_conditions``)."""
        key = s3_conditional.probe_key()
        path = self._path(key)

        def one(body: bytes | None, generation: Any) -> bool:
            result = s3_conditional.commit(self.fs, [(path, body, generation)])[0]
            if isinstance(result, BaseException):
                raise result
            return result

        with self._remote("probing conditional writes with", [key]):
            return s3_conditional.probe_conditions(
                one, lambda: remove(self.fs, [path], self.root), True)

    # -- filesystem ---------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        """The fsspec filesystem (created on first use, and again after a fork)."""
        if self._fs is None or self._fs_pid != os.getpid():
            with self._lock:
                if self._fs is None or self._fs_pid != os.getpid():
                    fs, root = make_filesystem(self.url, self.storage_options)
                    self._root = root.rstrip("/")
                    self._fs, self._fs_pid = fs, os.getpid()
        return self._fs

    @contextlib.contextmanager
    def _remote(self, action: str, keys: Sequence[str]) -> Iterator[None]:
        """Backend errors raised inside, as a StoreError naming the keys and endpoint."""
        try:
            yield
        except (ChunkstoreError, *PASS_THROUGH):
            raise
        except backend_errors() as e:
            raise self._failure(action, keys, e) from e

    @property
    def root(self) -> str:
        """The store's root path on the filesystem (no protocol, no trailing slash)."""
        _ = self.fs
        return self._root

    @property
    def _cat_kwargs(self) -> dict[str, Any]:
        """``calls.cat_kwargs`` of the filesystem, worked out once per filesystem."""
        fs = self.fs
        cached = self.__dict__.get("_cat_kw")
        if cached is None or cached[0] is not fs:
            cached = self._cat_kw = (fs, cat_kwargs(fs))
        return cached[1]

    def _path(self, key: str) -> str:
        validate_key(key)
        if "?versionId=" in key and is_s3(self.fs):
            # s3fs reads it as an object version, whatever follows: the key would be
            # another object's (obstore keeps it as part of the name)
            raise InvalidKeyError(f"{self!r}: key {key!r}: s3fs reads '?versionId=' as an "
                                  "object version, not as part of the name; rename the node "
                                  "or use the obstore backend")
        root = self.root
        return f"{root}/{key}" if root else key

    # -- reads --------------------------------------------------------------------------
    # public calls use private helpers, never each other, so wrappers count calls exactly
    def get(self, key: str, byte_range: ByteRange | None = None,
            max_bytes: int | None = None) -> bytes | None:
        if max_bytes is not None and byte_range is None:
            return self._read_bounded([key], max_bytes)[0]
        return self._read([(key, byte_range)])[0]

    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        """All values with one concurrent ``fs.cat`` (missing keys -> None); with
        ``max_bytes``, one ``cat_ranges`` of at most ``max_bytes + 1`` bytes each."""
        if not keys:
            return []
        if max_bytes is not None:
            return self._read_bounded(keys, max_bytes)
        paths = [self._path(k) for k in keys]
        plain = [p for p in paths if not GLOB_MAGIC.search(p)]
        found: dict[str, Any] = {}
        if plain:
            with self._remote("reading", keys):
                out = self.fs.cat(plain, on_error="return", **self._cat_kwargs)
            found = {self.fs._strip_protocol(p): v for p, v in out.items()}
        results: list[bytes | None] = []
        for key, path in zip(keys, paths, strict=True):
            if GLOB_MAGIC.search(path):  # literal name with glob characters
                results.append(self._read([(key, None)])[0])
                continue
            results.append(self._value(key, found.get(self.fs._strip_protocol(path),
                                                      FileNotFoundError(path))))
        return results

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        """Byte ranges of several keys with one concurrent ``fs.cat_ranges`` (on S3 with
        ``object_size``: GETs that also return the object's size)."""
        return self._read(requests, object_size)

    def _read(self, requests: Sequence[tuple[str, ByteRange | None]],
              object_size: int | None = None) -> list[bytes | None]:
        if not requests:
            return []
        paths, starts, ends, positions = [], [], [], []
        results: list[bytes | None] = [None] * len(requests)
        empty: list[int] = []
        for i, (key, byte_range) in enumerate(requests):
            start, stop = byte_range if byte_range is not None else (None, None)
            path = self._path(key)
            if start is not None and stop is not None and (stop <= start or start < 0):
                empty.append(i)  # nothing to read; only existence matters
                continue
            paths.append(path)
            starts.append(start)
            ends.append(stop)
            positions.append(i)
        sizes: dict[str, int | None] = {}
        if paths:
            keys = [requests[i][0] for i in positions]
            with self._remote("reading", keys):
                if object_size is not None and is_s3(self.fs):  # sizes from the GETs
                    out, learned = s3_cat_ranges_sized(self.fs, paths, starts, ends)
                    sizes.update((k, n) for k, n in zip(keys, learned, strict=True)
                                 if n is not None)
                else:
                    out = self.fs.cat_ranges(paths, starts, ends, on_error="return",
                                             **self._cat_kwargs)
            for i, value, start in zip(positions, out, starts, strict=True):
                results[i] = self._ranged_value(requests[i][0], value, start)
        for i in empty:
            results[i] = b"" if self._size(requests[i][0]) is not None else None
        if object_size is not None:
            self._check_sizes(requests, results, sizes, object_size)
        return results

    def get_versioned_ranges(self, requests: Sequence[tuple[str, ByteRange | None, Any]]
                             ) -> list[tuple[bytes | None, Any]]:
        """On S3: byte ranges with their objects' ETags, concurrently, a request pinned to
        an ETag checked against the answer's and sent with ``If-Match`` (unless the
        server is known to ignore conditions; see ``sized.s3_get_pinned``). Elsewhere (no
        conditional reads): ``Store.get_versioned_ranges``."""
        if not requests:
            return []
        if not is_s3(self.fs):
            return unversioned_ranges(self, requests, self._read)
        for key, _, pinned in requests:
            if pinned is not ANY and not isinstance(pinned, s3_conditional.ETag):
                raise ValueError(f"{self!r}: a read of {key!r} pinned to {pinned!r}, not "
                                 "an ETag")
        keys = [k for k, _, _ in requests]
        items = [(self._path(k), *(r if r is not None else (None, None)), g)
                 for k, r, g in requests]
        with self._remote("reading", keys):
            # a server known to ignore conditions is sent none: the ETags are checked
            found = s3_get_pinned(self.fs, items, self._versioned_reads)
        self._raise_read_failure(keys, found)
        return found

    def _value(self, key: str, value: Any) -> bytes | None:
        if isinstance(value, BaseException):
            if is_missing(value):
                return None
            raise self._failure("reading", [key], value) from value
        return bytes(value)

    def _ranged_value(self, key: str, value: Any, start: int | None) -> bytes | None:
        if (isinstance(value, BaseException) and not is_missing(value)
                and start is not None and start >= 0):
            # a range starting past the end (HTTP 416): empty, if the key exists
            size = self._size(key)
            if size is not None and start >= size:
                return b""
        return self._value(key, value)

    def _size(self, key: str) -> int | None:
        path = self._path(key)
        with self._remote("reading", [key]):
            return object_size(self.fs, path)

    def _check_sizes(self, requests: Sequence[tuple[str, ByteRange | None]],
                     results: list[bytes | None], sizes: dict[str, int | None],
                     object_size: int) -> None:
        """Every key found holds ``object_size`` bytes (sizes not learned from the reads
        are asked for, concurrently), else ObjectSizeError naming it."""
        found = list(dict.fromkeys(k for (k, _), v in zip(requests, results, strict=True)
                                   if v is not None))
        unknown = [k for k in found if k not in sizes]
        if unknown:
            with self._remote("reading", unknown):
                got = object_sizes(self.fs, [self._path(k) for k in unknown])
            for key, size in zip(unknown, got, strict=True):
                if isinstance(size, BaseException):
                    raise self._failure("reading", [key], size) from size
                sizes[key] = size
        for key in found:
            size = sizes[key]
            if size is not None and size != object_size:
                raise wrong_size(self, key, size, object_size)

    def _read_bounded(self, keys: Sequence[str], max_bytes: int) -> list[bytes | None]:
        """Whole values, each read as its first ``max_bytes + 1`` bytes: one more than
        that means a larger object (refused, ObjectSizeError)."""
        values = self._read([(k, (0, max_bytes + 1)) for k in keys])
        for key, value in zip(keys, values, strict=True):
            if value is not None and len(value) > max_bytes:
                raise too_large(self, key, len(value), max_bytes, at_least=True)
        return values

    # -- versioned reads (S3: with ETags) -------------------------------------------------
    def get_versioned_many(self, keys: Sequence[str], max_bytes: int | None = None
                           ) -> list[tuple[bytes | None, Any]]:
        """On S3: each body with its ETag, concurrently; with ``max_bytes``, GETs of at
        most ``max_bytes + 1`` bytes whose object size is read from their headers before
        the body (a larger object: ObjectSizeError, its body never downloaded).
        Elsewhere: values with ``ANY``."""
        if not self._versioned_reads:
            return Store.get_versioned_many(self, keys, max_bytes)
        if max_bytes is None:
            return self._get_versioned(keys)
        paths = [self._path(k) for k in keys]
        with self._remote("reading", keys):
            found = s3_get_versioned_bounded(self.fs, paths, max_bytes)
        self._raise_read_failure(keys, found, unless=is_invalid_range)
        empty = [i for i, item in enumerate(found) if isinstance(item, BaseException)]
        if empty:  # an empty object, which no range fits (416): read whole
            again = self._get_versioned([keys[i] for i in empty])
            for i, item in zip(empty, again, strict=True):
                found[i] = item
        for key, (value, generation) in zip(keys, found, strict=True):
            if value is None and type(generation) is int:
                raise too_large(self, key, generation, max_bytes)
        return found

    def _raise_read_failure(self, keys: Sequence[str], found: Sequence[Any],
                            unless: Callable[[BaseException], bool] | None = None) -> None:
        """Raise the first failure among the per-key results ``found`` (one of ours as it
        is, another as a StoreError naming its key), skipping failures ``unless`` accepts."""
        for key, item in zip(keys, found, strict=True):
            if not isinstance(item, BaseException):
                continue
            if isinstance(item, ChunkstoreError):
                raise item
            if unless is None or not unless(item):
                raise self._failure("reading", [key], item) from item

    def _get_versioned(self, keys: Sequence[str]) -> list[tuple[bytes | None, Any]]:
        paths = [self._path(k) for k in keys]
        with self._remote("reading", keys):
            found = s3_conditional.get_versioned(self.fs, paths)
        self._raise_read_failure(keys, found)
        return found

    # -- writes ---------------------------------------------------------------------------
    def set(self, key: str, value: BytesLike) -> None:
        self._write([(key, value)])

    def set_many(self, items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]]) -> None:
        """All values with one concurrent ``fs.pipe`` (one atomic PUT per object on S3)."""
        self._write(list(items.items() if isinstance(items, Mapping) else items))

    def _write(self, pairs: list[tuple[str, BytesLike]]) -> None:
        for key, _ in pairs:
            self._check_writable(key)
        data = {self._path(k): bytes(v) for k, v in pairs}
        if not data:
            return
        try:
            with self._remote("writing", [k for k, _ in pairs]):
                put(self.fs, data)
        finally:
            self._notify_written([k for k, _ in pairs])

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        """On S3: unconditional items through the batched writes and deletes, the others
        as one conditional request each, concurrently (see ``s3_conditional``)."""
        items = list(items)
        if not self._conditional_requests or not items:
            return Store.commit_many(self, items)
        for key, _, _ in items:
            self._check_writable(key)
        if not self._commits_checked([k for k, _, _ in items]):  # the server ignores them
            return Store.commit_many(self, items)
        puts = [(k, v) for k, v, g in items if g is ANY and v is not None]
        deletes = [k for k, v, g in items if g is ANY and v is None]
        checked = [i for i, (_, _, g) in enumerate(items) if g is not ANY]
        if puts:
            self._write(puts)
        if deletes:
            self._delete(deletes)
        done = [True] * len(items)
        if checked:
            requests = [(self._path(items[i][0]), None if items[i][1] is None
                         else bytes(items[i][1]), items[i][2]) for i in checked]
            keys = [items[i][0] for i in checked]
            try:
                with self._remote("writing", keys):
                    outcome = s3_conditional.commit(self.fs, requests)
            finally:
                self._notify_written(keys)
            for i, result in zip(checked, outcome, strict=True):
                if isinstance(result, BaseException):
                    raise self._failure("writing", [items[i][0]], result) from result
                done[i] = result
        return done

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            self._check_writable(key)
        paths = [self._path(k) for k in keys]
        if not paths:
            return
        try:
            with self._remote("deleting", keys):
                remove(self.fs, paths, self.root)
        finally:
            self._notify_written(keys)

    # -- listing (from the deepest directory the prefix names) ----------------------------
    def list_prefix(self, prefix: str) -> Iterator[str]:
        head, _, _ = validate_prefix(prefix).rpartition("/")
        start = self.root if not head else self._path(head)
        self.fs.invalidate_cache(start)
        with self._remote("listing", [prefix]):
            try:
                paths = self.fs.find(start)
            except FileNotFoundError:
                paths = []
        return iter(keys_below(self.fs, self.root, paths, prefix))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        start = self._path(base.rstrip("/")) if base else self.root
        self.fs.invalidate_cache(start)
        with self._remote("listing", [base]):
            try:
                entries = self.fs.ls(start, detail=False)
            except FileNotFoundError:
                return iter(())
        return iter(names_in(self.fs, self.root, entries, base))
