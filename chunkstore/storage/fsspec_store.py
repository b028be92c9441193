"""FsspecStore: any fsspec filesystem (S3, GCS, memory, local files, zip, ...).

Batched calls map onto fsspec's batched calls, which async filesystems (s3fs, gcsfs)
run concurrently on their own event loop: ``get_many`` is one ``fs.cat(paths,
on_error="return")``, ``get_ranges`` one ``fs.cat_ranges``, ``set_many`` one
``fs.pipe({...})`` (concurrent PUTs in a sliding window of at most ``PUT_WINDOW_REQUESTS``
requests and ``PUT_WINDOW_BYTES`` in flight, so that a large batch streams with bounded
memory) and ``delete_many`` one ``fs.rm([...])`` (S3 bulk delete). No call makes one
serial round trip per key, and reads and writes never list.

Atomicity, per backend:

* S3 / GCS / Azure: one PUT per value; an object is replaced atomically (a reader
  sees the old or the new object, never a mix). ``set_many`` is not atomic as a whole.
* ``memory://``: a value is replaced by one dict assignment, atomically.
* ``file://``: the value is written to a temporary file in the same directory and
  renamed over the key (like LocalStore).
* other filesystems: whatever their ``pipe_file`` guarantees (often nothing).

The filesystem is created lazily from ``(url, storage_options)``, which is also all
that pickling sends, so a forked or remote worker builds its own session and event
loop instead of inheriting the parent's.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import fsspec

from .base import ByteRange, BytesLike, Store, normalize_prefix, validate_key

_GLOB_MAGIC = re.compile(r"[*?\[]")  # fsspec's batched calls expand these as globs
_TEMP_TAG = ".chunkstore-tmp-"
_counter = itertools.count()
#: at most this many bytes of values are being sent at once by ``set_many`` ...
PUT_WINDOW_BYTES = 64 * 2**20
#: ... in at most this many concurrent requests (each holds a copy of its value)
PUT_WINDOW_REQUESTS = 16


def _is_missing(err: BaseException) -> bool:
    return isinstance(err, FileNotFoundError | KeyError)


class FsspecStore(Store):
    """A Store on an fsspec URL, e.g. ``"s3://bucket/data.zarr"`` or ``"memory://x"``.

    ``storage_options`` are passed to the filesystem (credentials, ``endpoint_url``
    inside ``client_kwargs`` for S3, ...). Use :meth:`from_filesystem` to wrap an
    existing filesystem object.

    >>> s = FsspecStore("memory://doc-example")
    >>> s.set("a/b", b"hello")
    >>> s.get_many(["a/b", "missing"])
    [b'hello', None]
    """

    supports_partial_reads = True
    #: decoded bytes per write batch of the chunk engine (its encoded chunks wait in
    #: memory until sent): a few PUT windows, so writes stream with bounded memory
    write_batch_bytes = 64 * 2**20

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None,
                 read_only: bool = False) -> None:
        super().__init__(read_only)
        if not isinstance(url, str) or "://" not in url and "::" not in url:
            raise ValueError(f"FsspecStore needs a URL with a protocol (e.g. 's3://...'), "
                             f"got {url!r}")
        self.url = url.rstrip("/") if not url.endswith("://") else url
        self.storage_options = dict(storage_options or {})
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

    # -- identity -----------------------------------------------------------------------
    def _description(self) -> tuple[Any, ...]:
        return (self.url, self.storage_options, self._read_only)

    def __repr__(self) -> str:
        return f"FsspecStore({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FsspecStore) and other.url == self.url
                and other.storage_options == self.storage_options)

    def __hash__(self) -> int:
        return hash(("FsspecStore", self.url))

    def with_read_only(self, read_only: bool = True) -> FsspecStore:
        """A view on the same filesystem object (and of the same class) with the flag."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._read_only = bool(read_only)
        return clone

    def sibling(self, suffix: str) -> FsspecStore | None:
        if not self.root:
            return None
        return FsspecStore(self.url + suffix, self.storage_options)

    def remove_root(self) -> None:
        try:
            self.fs.rmdir(self.root)
        except (OSError, NotImplementedError):
            pass

    # -- filesystem ---------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        """The fsspec filesystem (created on first use, and again after a fork)."""
        if self._fs is None or self._fs_pid != os.getpid():
            with self._lock:
                if self._fs is None or self._fs_pid != os.getpid():
                    fs, root = fsspec.core.url_to_fs(self.url, **self.storage_options)
                    self._root = root.rstrip("/")
                    self._fs, self._fs_pid = fs, os.getpid()
        return self._fs

    @property
    def root(self) -> str:
        """The store's root path on the filesystem (no protocol, no trailing slash)."""
        _ = self.fs
        return self._root

    @property
    def _cat_kwargs(self) -> dict[str, Any]:
        """Extra arguments of cat/cat_ranges: s3fs would otherwise send a HEAD before
        each whole-object GET (to decide on a multi-part download), doubling requests."""
        fs = self.fs
        cached = self.__dict__.get("_cat_kw")
        if cached is not None and cached[0] is fs:
            return cached[1]
        cat_file = getattr(fs, "_cat_file", None) or fs.cat_file
        try:
            params = inspect.signature(cat_file).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        kwargs = {"max_concurrency": 1} if "max_concurrency" in params else {}
        self._cat_kw = (fs, kwargs)
        return kwargs

    @property
    def _atomic_rename(self) -> bool:
        protocol = self.fs.protocol
        return bool({"file", "local"} & set((protocol,) if isinstance(protocol, str)
                                             else protocol))

    def _path(self, key: str) -> str:
        validate_key(key)
        root = self.root
        return f"{root}/{key}" if root else key

    def _key_of(self, path: str) -> str | None:
        """The key of a listed path (None for paths outside the root)."""
        root = self.fs._strip_protocol(self.root) if self.root else ""
        path = self.fs._strip_protocol(path)
        if not root:
            return path.lstrip("/") or None
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
        return None

    # -- reads --------------------------------------------------------------------------
    # public calls use private helpers, never each other, so wrappers count calls exactly
    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        return self._read([(key, byte_range)])[0]

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """All values with one concurrent ``fs.cat`` (missing keys -> None)."""
        if not keys:
            return []
        paths = [self._path(k) for k in keys]
        plain = [p for p in paths if not _GLOB_MAGIC.search(p)]
        found: dict[str, Any] = {}
        if plain:
            out = self.fs.cat(plain, on_error="return", **self._cat_kwargs)
            found = {self.fs._strip_protocol(p): v for p, v in out.items()}
        results: list[bytes | None] = []
        for key, path in zip(keys, paths, strict=True):
            if _GLOB_MAGIC.search(path):  # literal name with glob characters
                results.append(self._read([(key, None)])[0])
                continue
            results.append(self._value(key, found.get(self.fs._strip_protocol(path),
                                                      FileNotFoundError(path))))
        return results

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Byte ranges of several keys with one concurrent ``fs.cat_ranges``."""
        return self._read(requests)

    def _read(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
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
        if paths:
            out = self.fs.cat_ranges(paths, starts, ends, on_error="return", **self._cat_kwargs)
            for i, value, start in zip(positions, out, starts, strict=True):
                results[i] = self._ranged_value(requests[i][0], value, start)
        for i in empty:
            results[i] = b"" if self._size(requests[i][0]) is not None else None
        return results

    def _value(self, key: str, value: Any) -> bytes | None:
        if isinstance(value, BaseException):
            if _is_missing(value):
                return None
            raise OSError(f"reading key {key!r} from {self!r} failed: {value}") from value
        return bytes(value)

    def _ranged_value(self, key: str, value: Any, start: int | None) -> bytes | None:
        if (isinstance(value, BaseException) and not _is_missing(value)
                and start is not None and start >= 0):
            # a range starting past the end (HTTP 416): empty, if the key exists
            size = self._size(key)
            if size is not None and start >= size:
                return b""
        return self._value(key, value)

    def exists(self, key: str) -> bool:
        return self._size(key) is not None

    def getsize(self, key: str) -> int | None:
        return self._size(key)

    def _size(self, key: str) -> int | None:
        path = self._path(key)
        fs = self.fs
        if hasattr(fs, "call_s3") and hasattr(fs, "split_path"):
            # one HEAD; fs.info would LIST the prefix after a 404 to look for a directory
            bucket, object_key, _ = fs.split_path(path)
            try:
                return int(fs.call_s3("head_object", Bucket=bucket, Key=object_key)
                           ["ContentLength"])
            except FileNotFoundError:
                return None
        fs.invalidate_cache(path)
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            return None
        if info.get("type") == "directory":
            return None
        return int(info["size"])

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
        if self._atomic_rename:
            self._set_by_rename(data)
        elif getattr(self.fs, "async_impl", False):  # a sliding window of concurrent PUTs
            largest = max(len(v) for v in data.values())
            window = max(1, min(PUT_WINDOW_REQUESTS, PUT_WINDOW_BYTES // max(1, largest)))
            self.fs.pipe(data, batch_size=window)
        else:
            self.fs.pipe(data)

    def _set_by_rename(self, data: dict[str, bytes]) -> None:
        """Local files: write a temporary sibling and rename it over the key."""
        for path, value in data.items():
            parent = path.rsplit("/", 1)[0]
            tmp = f"{parent}/{_TEMP_TAG}{os.getpid()}-{threading.get_ident()}-{next(_counter)}"
            self.fs.makedirs(parent, exist_ok=True)
            try:
                self.fs.pipe_file(tmp, value)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise

    def delete(self, key: str) -> None:
        self._delete([key])

    def delete_many(self, keys: Iterable[str]) -> None:
        """One batched ``fs.rm`` (S3: bulk DELETE of up to 1000 keys per request)."""
        self._delete(list(keys))

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            self._check_writable(key)
        paths = [self._path(k) for k in keys]
        if not paths:
            return
        try:
            self.fs.rm(paths)
        except FileNotFoundError:  # some filesystems refuse missing paths in a batch
            for path in paths:
                try:
                    self.fs.rm_file(path)
                except FileNotFoundError:
                    pass
        if self._atomic_rename:
            self._prune_dirs(paths)

    def _prune_dirs(self, paths: list[str]) -> None:
        for parent in sorted({p.rsplit("/", 1)[0] for p in paths}, key=len, reverse=True):
            while parent.startswith(self.root + "/"):
                try:
                    os.rmdir(parent)
                except OSError:
                    break
                parent = parent.rsplit("/", 1)[0]

    def delete_prefix(self, prefix: str) -> None:
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        self._delete(list(self.list_prefix(base)))

    # -- listing --------------------------------------------------------------------------
    def list_prefix(self, prefix: str) -> Iterator[str]:
        head, _, _ = prefix.rpartition("/")
        start = self.root if not head else self._path(head)
        self.fs.invalidate_cache(start)
        try:
            paths = self.fs.find(start)
        except FileNotFoundError:
            paths = []
        keys = []
        for path in paths:
            key = self._key_of(path)
            if key is not None and key.startswith(prefix) and _TEMP_TAG not in key:
                keys.append(key)
        return iter(sorted(keys))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        start = self._path(base.rstrip("/")) if base else self.root
        self.fs.invalidate_cache(start)
        try:
            entries = self.fs.ls(start, detail=False)
        except FileNotFoundError:
            return iter(())
        names = set()
        for path in entries:
            key = self._key_of(path)
            if key is None or not key.startswith(base) or key == base.rstrip("/"):
                continue
            name = key[len(base):].split("/", 1)[0]
            if name and _TEMP_TAG not in name:
                names.add(name)
        return iter(sorted(names))
