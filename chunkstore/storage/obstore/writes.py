"""Writes of ObstoreStore: conditional commits (ETags), plain writes and deletes.

A mixin of :class:`~chunkstore.storage.obstore.store.ObstoreStore`, which provides the
client, the key-to-path mapping (``_path``), failure reporting (``_failure``) and the
versioned reads.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from chunkstore.errors import ChunkstoreError, InvalidKeyError
from chunkstore.storage.base import (
    ABSENT,
    ANY,
    BytesLike,
    Commit,
    Store,
    normalize_prefix,
    validate_key,
)
from chunkstore.storage.obstore.setup import is_conflict, is_missing, obstore_module, run_all
from chunkstore.storage.s3_conditional import Conditions, ETag, probe_conditions, probe_key


class ObstoreWrites:
    """Write methods of ObstoreStore (see the module docstring)."""

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        """Unconditional items as plain PUTs and one bulk DELETE, the others as one
        conditional request each; all concurrently."""
        items = list(items)
        if not items:
            return []
        for key, _, _ in items:
            self._check_writable(key)
        if not self._commits_checked([k for k, _, _ in items]):  # the server ignores them
            return Store.commit_many(self, items)  # type: ignore[arg-type]
        deletes = [k for k, v, g in items if g is ANY and v is None]
        others = [(i, (k, self._path(k), None if v is None else _as_buffer(v), g))
                  for i, (k, v, g) in enumerate(items) if not (g is ANY and v is None)]
        done = [True] * len(items)
        if deletes:
            self._delete(deletes)
        if others:
            out = run_all(self._commit_one, [item for _, item in others])
            for (i, (key, *_)), result in zip(others, out, strict=True):
                done[i] = self._check("writing", key, result)
        return done

    def _commit_one(self, item: tuple[str, str, Any, Any]) -> bool:
        key, path, body, generation = item
        obs = obstore_module()
        if body is None:  # a checked delete
            if generation is ABSENT:
                return self._size_of(path) is None
            if not isinstance(generation, ETag):
                return False
            return self._delete_if_match(key, path, generation)
        if generation is ANY:
            mode: Any = "overwrite"
        elif generation is ABSENT:
            mode = "create"
        elif isinstance(generation, ETag):
            mode = {"e_tag": generation.value}
        else:
            return False
        try:
            obs.put(self.client, path, body, mode=mode, use_multipart=False)
        except Exception as e:
            if mode != "overwrite" and is_conflict(e):
                return False
            raise
        return True

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

    def _delete_if_match(self, key: str, path: str, generation: ETag) -> bool:
        """DELETE with ``If-Match`` through a presigned URL (object_store has no
        conditional delete): True when applied, False when the object changed or is
        gone (412, 409, 404)."""
        url = obstore_module().sign(self.client, "DELETE", path, timedelta(minutes=5))
        request = urllib.request.Request(url, method="DELETE",
                                         headers={"If-Match": generation.value})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
        except urllib.error.HTTPError as e:
            if e.code in (404, 409, 412):
                return False
            raise
        return True

    # -- writes -----------------------------------------------------------------------
    def set(self, key: str, value: BytesLike) -> None:
        self._check_writable(key)
        path = self._path(key)
        try:
            obstore_module().put(self.client, path, _as_buffer(value), use_multipart=False)
        except Exception as e:
            raise self._failure("writing", [key], e) from e

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
        todo = [(k, self._path(k), _as_buffer(v), ANY) for k, v in pairs]
        out = run_all(self._commit_one, todo)
        for (key, _), result in zip(pairs, out, strict=True):
            self._check("writing", key, result)

    def delete(self, key: str) -> None:
        self._delete([key])

    def delete_many(self, keys: Iterable[str]) -> None:
        """One bulk DELETE per 1000 keys (S3 DeleteObjects); missing keys are ignored."""
        self._delete(list(keys))

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            self._check_writable(key)
        if not keys:
            return
        paths = [self._path(k) for k in keys]
        try:
            obstore_module().delete(self.client, paths if len(paths) > 1 else paths[0])
        except Exception as e:
            if is_missing(e):
                return
            raise self._failure("deleting", keys, e) from e

    def delete_prefix(self, prefix: str) -> None:
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        self._delete(list(self.list_prefix(base)))


def _as_buffer(value: BytesLike) -> Any:
    """A value obstore takes without a copy: bytes as they are, other buffers as a flat
    byte view."""
    if isinstance(value, bytes):
        return value
    view = memoryview(value)
    if view.c_contiguous and view.ndim == 1 and view.format in ("B", "b", "c"):
        return view
    return bytes(view)


def is_listable_key(key: str) -> bool:
    try:
        validate_key(key)
    except InvalidKeyError:
        return False
    return True
