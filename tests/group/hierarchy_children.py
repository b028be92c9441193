"""What the child processes of tests/group/test_hierarchy_attacks.py run: a module that
imports only what the fork server has preloaded (tests/multiproc.py), so that a child does
not import the test module and zarr (~0.2 s of CPU each) before it starts."""

from __future__ import annotations

import chunkstore as cs

#: attributes each writer sets on the group and on its array
ATTR_ROUNDS = 8


def attr_writer(path: str, i: int, start) -> None:
    """Set ``k{i}_{n}`` on the group at ``path`` and on its array ``a``, n < ATTR_ROUNDS."""
    start.wait()
    g = cs.open_group(path)
    for n in range(ATTR_ROUNDS):
        g.attrs[f"k{i}_{n}"] = {"v": [i, n], "\u00e9\u0301": n}
        g["a"].attrs[f"k{i}_{n}"] = n


def copy_group(src: str, dst: str, started) -> None:
    """Copy the group at ``src`` to ``dst`` in small pieces, ``started`` set first."""
    g = cs.open_group(src, mode="r")
    started.set()
    cs.copy(g, dst, max_bytes=800)
