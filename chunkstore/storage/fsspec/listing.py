"""Listing paths of an fsspec filesystem as store keys: what FsspecStore's
``list_prefix`` and ``list_dir`` keep. Temporary files and names that are not valid keys
are never listed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.base import validate_key
from chunkstore.storage.local.temp import TEMP_PREFIX


def is_key(key: str) -> bool:
    """Whether ``key`` is a valid store key."""
    try:
        validate_key(key)
    except InvalidKeyError:
        return False
    return True


def key_of(fs: Any, root: str, path: str) -> str | None:
    """The key of a listed ``path`` below ``root`` (None for paths outside it)."""
    root = fs._strip_protocol(root) if root else ""
    path = fs._strip_protocol(path)
    if not root:
        return path.lstrip("/") or None
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    return None


def keys_below(fs: Any, root: str, paths: Iterable[str], prefix: str) -> list[str]:
    """The keys of ``paths`` (found below ``root``) that start with ``prefix``, sorted."""
    keys = []
    for path in paths:
        key = key_of(fs, root, path)
        if key is not None and key.startswith(prefix) and TEMP_PREFIX not in key and is_key(key):
            keys.append(key)
    return sorted(keys)


def names_in(fs: Any, root: str, paths: Iterable[str], base: str) -> list[str]:
    """The names of the immediate children of the directory ``base`` (``"a/b/"`` or
    ``""``) among ``paths`` (its listing), sorted."""
    names = set()
    for path in paths:
        key = key_of(fs, root, path)
        if key is None or not key.startswith(base) or key == base.rstrip("/"):
            continue
        name = key[len(base):].split("/", 1)[0]
        if name and TEMP_PREFIX not in name and is_key(name):
            names.add(name)
    return sorted(names)
