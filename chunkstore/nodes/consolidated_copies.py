"""Where the consolidated copies above a node are: in its store (the groups above it and,
v2, its own ``.zmetadata``) and in the groups enclosing a LocalStore's root
(``nodes.enclosing``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkstore.metadata.consolidated import V2_KEY
from chunkstore.metadata.nodes import join_path
from chunkstore.nodes.enclosing import enclosing_copies
from chunkstore.nodes.paths import ancestors, relative
from chunkstore.storage.base import Store


@dataclass(frozen=True)
class Copy:
    """A consolidated copy: the group at ``group`` of ``home`` in format ``fmt``. ``home``
    is the store of the node being changed, or (``enclosing``) the store of a group's
    directory above that store's root, where the node at ``p`` is at ``prefix/p``."""

    home: Store
    group: str
    fmt: int
    prefix: str = ""
    enclosing: bool = False

    def at(self, path: str) -> str:
        """Where the node at ``path`` of the changed store is in ``home``."""
        if not self.prefix:
            return path
        return join_path(self.prefix, path) if path else self.prefix

    def rel(self, path: str) -> str | None:
        """``path`` relative to the copy's group; None unless strictly below it (``""``
        is never returned: a v2 group's own ``.zmetadata`` holds no entry for itself)."""
        at = self.at(path)
        if at == self.group or (self.group and not at.startswith(self.group + "/")):
            return None
        return relative(at, self.group)


def holds_consolidated(raw: bytes | None, zarr_format: int) -> bool:
    """Whether a group's raw ``zarr.json`` (v3) or ``.zmetadata`` (v2) is a consolidated
    copy (a cheap test: the v3 document is parsed only when the copy is updated)."""
    if raw is None:
        return False
    return zarr_format == 2 or b'"consolidated_metadata"' in raw


def _candidates(paths: Sequence[str], zarr_format: int | None) -> list[tuple[str, int]]:
    """Where copies above ``paths`` may be: their ancestors, and (v2) the nodes' own
    ``.zmetadata``, which copies a v2 group's attributes."""
    out: list[tuple[str, int]] = []
    for path in paths:
        above = ancestors(path)
        if zarr_format in (None, 3):
            out += [(p, 3) for p in above]
        if zarr_format in (None, 2):
            out += [(p, 2) for p in [*above, path]]
    return list(dict.fromkeys(out))


def find_copies(store: Store, paths: Sequence[str], zarr_format: int | None, *,
                groups: Sequence[str] | None = None, skip: Sequence[Copy] = (),
                enclosing: bool = True) -> list[Copy]:
    """The consolidated copies above the nodes at ``paths``: one batched read of the
    candidates' documents (those in ``skip`` excepted), unless the caller lists the
    groups holding copies in ``groups``; then those of enclosing directories."""
    known = {(c.group, c.fmt) for c in skip if not c.enclosing}
    candidates = [c for c in _candidates(paths, zarr_format) if c not in known]
    if groups is not None:
        wanted = set(groups)
        found = [c for c in candidates if c[0] in wanted]
    else:
        keys = [join_path(p, "zarr.json" if fmt == 3 else V2_KEY) for p, fmt in candidates]
        raw = store.get_many(keys) if keys else []
        found = [c for c, blob in zip(candidates, raw, strict=True)
                 if holds_consolidated(blob, c[1])]
    copies = [Copy(store, g, fmt) for g, fmt in found]
    if enclosing:
        formats = (zarr_format,) if zarr_format is not None else (3, 2)
        for fmt in formats:
            copies += [Copy(home, "", fmt, prefix=rel, enclosing=True)
                       for home, rel in enclosing_copies(store, fmt)]
    return copies
