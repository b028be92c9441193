"""Listing keys of an obstore (S3) store: the ``ObstoreListing`` mixin of ObstoreStore
(its client, root and key mapping come from the store). Temporary upload names and
keys no Zarr node could have are not listed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chunkstore.storage.base import normalize_prefix, validate_prefix
from chunkstore.storage.local.temp import TEMP_PREFIX
from chunkstore.storage.obstore.setup import is_missing, obstore_module
from chunkstore.storage.obstore.writes import is_listable_key


class ObstoreListing:
    """``list_prefix`` / ``list_dir`` through obstore's LIST calls."""

    _root: str
    client: Any

    def _key_of(self, path: str) -> str | None:
        if not self._root:
            return path or None
        if path.startswith(self._root + "/"):
            return path[len(self._root) + 1:]
        return None

    def list_prefix(self, prefix: str) -> Iterator[str]:
        head, _, _ = validate_prefix(prefix).rpartition("/")
        start = self._path(head) if head else self._root
        try:
            batches = obstore_module().list(self.client, prefix=start or None).collect()
        except Exception as e:
            if is_missing(e):
                return iter(())
            raise self._failure("listing", [prefix], e) from e
        keys = []
        for meta in batches:
            key = self._key_of(meta["path"])
            if (key is not None and key.startswith(prefix) and TEMP_PREFIX not in key
                    and is_listable_key(key)):
                keys.append(key)
        return iter(sorted(keys))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        start = self._path(base.rstrip("/")) if base else self._root
        try:
            found = obstore_module().list_with_delimiter(self.client, prefix=start or None)
        except Exception as e:
            if is_missing(e):
                return iter(())
            raise self._failure("listing", [base], e) from e
        names = set()
        paths = list(found["common_prefixes"]) + [m["path"] for m in found["objects"]]
        for path in paths:
            key = self._key_of(path.rstrip("/"))
            if key is None or not key.startswith(base) or key == base.rstrip("/"):
                continue
            name = key[len(base):].split("/", 1)[0]
            if name and TEMP_PREFIX not in name and is_listable_key(name):
                names.add(name)
        return iter(sorted(names))
