"""The writing half of FsspecStore: sets, deletes and conditional commits."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chunkstore.errors import ChunkstoreError
from chunkstore.storage import s3_conditional
from chunkstore.storage.base import ANY, BytesLike, Commit, Store, normalize_prefix


class FsspecWrites(Store):
    """Writes of an FsspecStore (a mixin: the store provides ``fs``, ``root``,
    ``_path``, ``_put``, ``_remote``, ``_failure`` and ``_atomic_rename``)."""

    fs: Any
    root: str
    _atomic_rename: bool
    # from s3_conditional.ProbedConditions: conditions can be sent, versioned reads
    # return ETags, and whether the server honours conditions (probed)
    _conditional_requests: bool
    _versioned_reads: bool
    _commits_checked: Any

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
        with self._remote("writing", [k for k, _ in pairs]):
            self._put(data)

    # -- versioned reads and conditional commits (S3) --------------------------------------
    def get_versioned_many(self, keys: Sequence[str]) -> list[tuple[bytes | None, Any]]:
        """On S3: each body with its ETag, concurrently; elsewhere values with ``ANY``."""
        if not self._versioned_reads:
            return super().get_versioned_many(keys)
        paths = [self._path(k) for k in keys]
        with self._remote("reading", keys):
            found = s3_conditional.get_versioned(self.fs, paths)
        for key, item in zip(keys, found, strict=True):
            if isinstance(item, BaseException):
                if isinstance(item, ChunkstoreError):
                    raise item
                raise self._failure("reading", [key], item) from item
        return found

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        """On S3: unconditional items through the batched writes and deletes, the others
        as one conditional request each, concurrently (see ``s3_conditional``)."""
        items = list(items)
        if not self._conditional_requests or not items:
            return super().commit_many(items)
        for key, _, _ in items:
            self._check_writable(key)
        if not self._commits_checked([k for k, _, _ in items]):  # the server ignores them
            return super().commit_many(items)
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
            with self._remote("writing", keys):
                outcome = s3_conditional.commit(self.fs, requests)
            for i, result in zip(checked, outcome, strict=True):
                if isinstance(result, BaseException):
                    raise self._failure("writing", [items[i][0]], result) from result
                done[i] = result
        return done

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
            return s3_conditional.probe_conditions(one, lambda: self._rm([path]), True)

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
        with self._remote("deleting", keys):
            self._rm(paths)

    def _rm(self, paths: list[str]) -> None:
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
