"""Pending marks in consolidated copies: which listed nodes a writer is changing now.

A writer that changes a node's documents first adds a *token* for the node to every
consolidated copy above it (and takes an array's entry out of the copy), then commits the
node, then removes its token and, when no other token is left for the node, writes the
node's fresh entry back (``nodes.consolidated``). A crash anywhere in between leaves a
token: chunkstore's consolidated open then reads that node's own documents instead of
trusting the copy, and zarr-python, which ignores the marks, sees the array missing from
the copy rather than with its old shape.

The marks are stored where zarr-python ignores unknown keys (checked against 3.1):
``consolidated_metadata["chunkstore_pending"]`` in a v3 group's ``zarr.json``, and a
top-level ``"chunkstore_pending"`` key in a v2 ``.zmetadata``. Format::

    {"<path relative to the group>": {"<token id>": [<unix time>, "<host>", <pid>, "<drop>"]}}

``drop`` says what the writer took out of the copy: ``"self"`` (the node's own entry:
an array, or a new node), ``"subtree"`` (the node and everything below: a deletion) or
``"none"`` (nothing: a group's attributes, whose entry must stay while its members are
listed, or zarr-python cannot open the copy at all).

``<host>`` is ``storage.host_identity.HOST_ID`` (host name, boot id, PID namespace). A
token whose writer is known to be dead (this very host identity, process gone) or that is
older than :data:`TOKEN_TTL` seconds is *expired*: the next writer of the copy
drops it and writes the node's entry back from the store. A token naming a host in an
older format (without the boot id) is never taken for a dead writer's: it expires by age.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from chunkstore.errors import MetadataError
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.host_identity import HOST_ID, dead_here

#: where the marks live in a v3 ``consolidated_metadata`` field / a v2 ``.zmetadata``
PENDING_KEY = "chunkstore_pending"
#: a token older than this (seconds) is taken for one of a dead writer on another host
TOKEN_TTL = 600.0
DROPS = ("self", "subtree", "none")

Pending = dict[str, dict[str, list[Any]]]


def new_token() -> str:
    """A fresh token id (unique per write, so two writers of one node each keep theirs)."""
    return uuid.uuid4().hex[:16]


def token_value(drop: str) -> list[Any]:
    """What a token records: when, who, and what it took out of the copy."""
    return [round(time.time(), 3), HOST_ID, os.getpid(), drop]


def expired(value: list[Any], now: float | None = None) -> bool:
    """Whether the writer of a token is gone (dead process on this host) or too old."""
    at, host, pid = value[0], value[1], value[2]
    now = time.time() if now is None else now
    if now - at > TOKEN_TTL:
        return True
    return dead_here(host, pid)


def parse_pending(field: Any, where: str) -> Pending:
    """The marks of a copy (``field``: the stored value, None when there is none);
    MetadataError naming ``where`` when they are malformed (refused, not ignored: a
    copy whose marks cannot be read cannot be trusted)."""
    if field is None:
        return {}
    bad = MetadataError(f"{where}: field {PENDING_KEY!r} is malformed (expected "
                        "{path: {token: [time, host, pid, drop]}})")
    if not isinstance(field, dict):
        raise bad
    out: Pending = {}
    for rel, tokens in field.items():
        if not isinstance(rel, str) or not isinstance(tokens, dict):
            raise bad
        try:
            rel = normalize_path(rel)
        except ValueError as e:
            raise MetadataError(f"{where}: field {PENDING_KEY!r}: bad path {rel!r}: {e}") from e
        if not rel:
            raise bad
        for token, value in tokens.items():
            if not (isinstance(token, str) and isinstance(value, list) and len(value) == 4
                    and isinstance(value[0], int | float) and isinstance(value[1], str)
                    and isinstance(value[2], int) and value[3] in DROPS):
                raise bad
        if tokens:
            out[rel] = {t: list(v) for t, v in tokens.items()}
    return out


def drops_subtree(tokens: dict[str, list[Any]]) -> bool:
    """Whether one of ``tokens`` took the node's subtree out of the copy."""
    return any(v[3] == "subtree" for v in tokens.values())


def purge(pending: Pending) -> tuple[Pending, set[str], set[str]]:
    """``pending`` without expired tokens; also the paths left without any token (their
    entries must be written back from the store) and, among them, those whose subtree a
    dropped token had taken out (to be read again whole). An expired token that took a
    subtree out while live tokens remain hands that duty to one of them."""
    now = time.time()
    kept: Pending = {}
    freed: set[str] = set()
    subtree: set[str] = set()
    for rel, tokens in pending.items():
        live = {t: list(v) for t, v in tokens.items() if not expired(v, now)}
        gone_subtree = drops_subtree({t: v for t, v in tokens.items() if t not in live})
        if live:
            if gone_subtree and not drops_subtree(live):
                live[min(live)][3] = "subtree"
            kept[rel] = live
        else:
            freed.add(rel)
            if gone_subtree:
                subtree.add(rel)
    return kept, freed, subtree


def below_pending_subtree(rel: str, pending: Pending) -> bool:
    """Whether an ancestor of ``rel`` has a token that took its subtree out (the entry of
    ``rel`` then waits for that writer: writing it back could list a deleted node)."""
    return any(rel.startswith(p + "/") and drops_subtree(t) for p, t in pending.items())
