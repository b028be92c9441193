"""The listing half of FsspecStore: keys below a prefix, names in a directory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.base import Store, normalize_prefix, validate_key, validate_prefix
from chunkstore.storage.local.temp import TEMP_PREFIX


def _is_key(key: str) -> bool:
    try:
        validate_key(key)
    except InvalidKeyError:
        return False
    return True


class FsspecListing(Store):
    """Listings of an FsspecStore (a mixin: the store provides ``fs``, ``root``,
    ``_path`` and ``_remote``). Temporary files and names that are not valid keys are
    never listed; listings start from the deepest directory the prefix names."""

    fs: Any
    root: str

    def _key_of(self, path: str) -> str | None:
        """The key of a listed path (None for paths outside the root)."""
        root = self.fs._strip_protocol(self.root) if self.root else ""
        path = self.fs._strip_protocol(path)
        if not root:
            return path.lstrip("/") or None
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
        return None

    def list_prefix(self, prefix: str) -> Iterator[str]:
        head, _, _ = validate_prefix(prefix).rpartition("/")
        start = self.root if not head else self._path(head)
        self.fs.invalidate_cache(start)
        with self._remote("listing", [prefix]):
            try:
                paths = self.fs.find(start)
            except FileNotFoundError:
                paths = []
        keys = []
        for path in paths:
            key = self._key_of(path)
            if (key is not None and key.startswith(prefix) and TEMP_PREFIX not in key
                    and _is_key(key)):
                keys.append(key)
        return iter(sorted(keys))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        start = self._path(base.rstrip("/")) if base else self.root
        self.fs.invalidate_cache(start)
        with self._remote("listing", [base]):
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
            if name and TEMP_PREFIX not in name and _is_key(name):
                names.add(name)
        return iter(sorted(names))
