"""What the child processes of tests/nodes/test_consolidated_crash.py run: a module that
imports only what the fork server has preloaded (tests/multiproc.py), so that a child
starts in milliseconds (a function of the test module made every child import the test
module and zarr: the 12 crash-step tests took ~50 s instead of ~11 s when another test had
started the fork server without them in its preload)."""

from __future__ import annotations

import os

import numpy as np

import chunkstore as cs
from chunkstore.nodes.documents import update_node
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.resolve import resolve_store


def run_op(root: str, op: str) -> None:
    """The change ``op`` of the group at ``root`` (built by the test's ``_build``)."""
    if op == "append":
        cs.open_array(root, path="arr", mode="r+").append(np.array([4, 5], dtype="i4"))
    elif op == "grow_and_attrs":  # v2: two documents (.zarray, then .zattrs)
        update_node(resolve_store(root, mode="r+"), "arr",
                    lambda m: m.replace(shape=(9,), attributes={**m.attributes, "k": "v"}))
    elif op == "own_directory":  # the member's directory as the store root
        cs.open_array(os.path.join(root, "arr"), mode="r+").resize(7)
    elif op == "delete":
        del cs.open_group(root, mode="r+", use_consolidated=False)["arr"]
    elif op == "group_attrs":
        cs.open_group(root, path="sub", mode="r+", use_consolidated=False).attrs["t"] = 1
    elif op == "replace":  # deletion, then creation
        cs.create_array(root, name="arr", shape=(11,), chunks=(4,), dtype="i4",
                        overwrite=True, zarr_format=cs.open_group(root, mode="r").zarr_format)
    else:
        raise ValueError(op)


DOCUMENTS = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}


def after_document_commits(hook) -> None:
    """Call ``hook(keys)`` after each commit of a LocalStore (in this process) that wrote
    a metadata document, with the documents' keys."""
    real = LocalStore.commit_many

    def commit_many(self, items):
        done = real(self, items)
        keys = [k for (k, _, _), ok in zip(items, done, strict=True)
                if ok and k.rsplit("/", 1)[-1] in DOCUMENTS]
        if keys:
            hook(keys)
        return done
    LocalStore.commit_many = commit_many


def crash_at(root: str, op: str, n: int) -> None:
    """Run ``op`` and die just after its n-th commit of metadata documents."""
    seen = []

    def hook(keys: list[str]) -> None:
        seen.append(keys)
        if len(seen) == n:
            os._exit(17)
    after_document_commits(hook)
    run_op(root, op)
    os._exit(0)


def record(root: str, op: str, out) -> None:
    """Put on ``out`` the metadata documents ``op`` commits, commit by commit."""
    seen: list[list[str]] = []
    after_document_commits(lambda keys: seen.append(sorted(keys)))
    run_op(root, op)
    out.put(seen)


def appender(root: str, own: bool, ready) -> None:
    """Append to ``arr`` forever (through its own directory when ``own``), ``ready`` set
    once the array is open."""
    if own:
        a = cs.open_array(os.path.join(root, "arr"), mode="r+")
    else:
        a = cs.open_group(root, mode="r+")["arr"]
    ready.set()
    while True:
        a.append(np.ones(1, "i4"))
