"""Listing keys of an obstore (S3) client below a root: what ObstoreStore's
``list_prefix`` and ``list_dir`` keep. Temporary upload names and keys no Zarr node could
have are not listed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.base import validate_key
from chunkstore.storage.local.temp import TEMP_PREFIX


def is_listable_key(key: str) -> bool:
    """Whether ``key`` is a valid store key."""
    try:
        validate_key(key)
    except InvalidKeyError:
        return False
    return True


def key_of(root: str, path: str) -> str | None:
    """The key of an object ``path`` below ``root`` (None for paths outside it)."""
    if not root:
        return path or None
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    return None


def keys_below(root: str, batches: Iterable[Any], prefix: str) -> list[str]:
    """The keys of the listed objects (obstore's metadata dicts) starting with
    ``prefix``, sorted."""
    keys = []
    for meta in batches:
        key = key_of(root, meta["path"])
        if (key is not None and key.startswith(prefix) and TEMP_PREFIX not in key
                and is_listable_key(key)):
            keys.append(key)
    return sorted(keys)


def names_in(root: str, found: dict[str, Any], base: str) -> list[str]:
    """The names of the immediate children of the directory ``base`` in obstore's
    ``list_with_delimiter`` answer ``found``, sorted."""
    names = set()
    paths = list(found["common_prefixes"]) + [m["path"] for m in found["objects"]]
    for path in paths:
        key = key_of(root, path.rstrip("/"))
        if key is None or not key.startswith(base) or key == base.rstrip("/"):
            continue
        name = key[len(base):].split("/", 1)[0]
        if name and TEMP_PREFIX not in name and is_listable_key(name):
            names.add(name)
    return sorted(names)
