"""What the child processes of tests/io/test_resize_and_shard_race_attacks.py run: a module
that imports only what the fork server has preloaded (tests/multiproc.py), so that a child
starts in milliseconds where a ``python -c`` subprocess spent ~3 s of CPU importing
chunkstore and dask before doing anything."""

from __future__ import annotations

import contextlib
import io

import chunkstore as cs
import chunkstore.dask  # noqa: F401  (cs.dask)


def rechunk(src: str, dst: str, chunks: tuple[int, ...], shards: tuple[int, ...] | None,
            max_mem: str) -> None:
    """``cs.dask.rechunk`` of ``src`` into ``dst`` (overwriting it)."""
    cs.dask.rechunk(src, chunks, dst, max_mem=max_mem, overwrite=True, shards=shards).execute()


def cli(argv: list[str]) -> None:
    """The ``chunkstore`` command (``chunkstore.cli.main``) with ``argv``, its output
    discarded; raises (a non-zero exit status of the process) when it fails."""
    from chunkstore.cli.main import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main(argv)
    if status:
        raise SystemExit(status)


def set_shards_to_fill(path: str) -> None:
    """Another process's writes of the sharded (16, 16) array at ``path``: a whole shard,
    part of another and a region of a third."""
    a = cs.open_array(path, mode="r+")
    a[0:8, 0:8] = 0
    a[8:16, 0:4] = 0
    a[8:12, 8:12] = 7


def zip_write(path: str) -> None:
    """A write of ``x[4:6]`` through a zip archive opened for appending, committed when
    the archive is closed."""
    with cs.ZipStore(path, mode="a") as st:
        cs.open_array(st, path="x", mode="r+")[4:6] = 9
