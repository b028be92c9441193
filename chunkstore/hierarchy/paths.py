"""Node paths inside a store: normalization and ancestry."""

from __future__ import annotations

from ..storage.base import validate_key


def normalize_path(path: str | None) -> str:
    """``"/a/b/"`` -> ``"a/b"``; ``None`` or ``"/"`` -> ``""`` (the root)."""
    if path is None:
        return ""
    path = str(path).strip("/")
    if path:
        validate_key(path)
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
