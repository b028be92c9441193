"""Node paths inside a store: normalization and ancestry."""

from __future__ import annotations

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.base import validate_key
from chunkstore.storage.local.temp import TEMP_PREFIX

#: names the formats give their documents: a node named so would never be listed
RESERVED_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
#: the directory of scratch data (rechunk intermediates) beside a node: never a node
#: itself (no metadata document), so never a member; names starting with ``__`` are
#: reserved by the Zarr v3 specification
SCRATCH_DIR = "__chunkstore_tmp__"


def normalize_path(path: str | None) -> str:
    """``"/a/b/"`` -> ``"a/b"``; ``None`` or ``"/"`` -> ``""`` (the root)."""
    if path is None:
        return ""
    path = str(path).strip("/")
    if path:
        validate_key(path)
    return path


def check_new_path(path: str) -> str:
    """Return the normalized ``path`` of a node to be created, or raise InvalidKeyError
    naming it when a component is a name reserved by the Zarr formats (``zarr.json``,
    ``.zarray``, ...) or by chunkstore's temporary files (``.chunkstore-tmp-*``) and
    scratch directories (``__chunkstore_tmp__``): such a node would open by name but never
    be listed (or be swept). Existing nodes are read as they are."""
    path = normalize_path(path)
    for part in path.split("/") if path else ():
        if part in RESERVED_NAMES or part.startswith(TEMP_PREFIX) or part == SCRATCH_DIR:
            what = ("a Zarr metadata document" if part in RESERVED_NAMES
                    else "chunkstore's temporary files")
            raise InvalidKeyError(f"node path {path!r}: {part!r} is a name reserved for "
                                  f"{what} (a node named so would never be listed)")
    return path


def ancestors(path: str) -> list[str]:
    """The group paths above ``path``, root first: ``"a/b/c"`` -> ``["", "a", "a/b"]``."""
    if not path:
        return []
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts))]


def relative(path: str, group: str) -> str:
    """``path`` relative to the group at ``group`` (an ancestor of it, or itself -> ``""``)."""
    if not group:
        return path
    return path[len(group):].lstrip("/")


def between(group: str, path: str) -> list[str]:
    """The paths strictly below ``group`` down to ``path`` included, outermost first:
    ``between("", "a/b/c")`` -> ``["a", "a/b", "a/b/c"]``."""
    return [p for p in [*ancestors(path), path] if len(p) > len(group)
            and (not group or p.startswith(group + "/"))]
