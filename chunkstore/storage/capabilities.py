"""What a store can do and what its calls cost: one frozen :class:`Capabilities` per store
(``Store.capabilities``), which the layers above read instead of probing attributes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The capabilities of a store. The defaults are those of a plain store (a user's own
    Store subclass): every read and write through ``get``/``set``, no checks."""

    #: the backend can read a byte range without fetching the whole value
    partial_reads: bool = True
    #: ``get_views`` hands out values in place (e.g. memory maps of files): picking a few
    #: elements out of a large value then costs no more than fetching byte ranges of it
    zero_copy_views: bool = False
    #: what one more request costs, in bytes read: ranged reads merge ranges closer than
    #: this, so many tiny ranges become a few larger ones (remote stores: ~1 MB)
    request_cost_bytes: int = 4096
    #: ``commit_many`` really checks generations (compare-and-swap): concurrent
    #: read-modify-writes of one object never lose an update. When False, the checks are
    #: skipped and writers of one object need a synchronizer.
    conditional_writes: bool = False
    #: a conditional commit may delete (value None); else the caller writes a value
    conditional_delete: bool = False
    #: the store sends conditional commits but its server was found to ignore them (an
    #: S3 server behind a gateway stripping ``If-Match``, see ``s3_conditional``): its
    #: commits are unchecked, and a partial chunk write without a synchronizer is refused
    #: (``io.rmw``). On S3 stores these three fields are verified by a probe of the
    #: server when first read from a writable store.
    conditional_writes_ignored: bool = False
    #: ``commit_many`` also takes strided numpy arrays of contiguous rows as values and
    #: stores their C-ordered bytes (writing rows one by one, without a copy first)
    writes_arrays: bool = False
    #: a ``read_session``'s ``read_into`` reads values straight into the caller's array
    reads_arrays: bool = False
    #: ``get_ranges`` reads all ranges of one key from one version of its value (else a
    #: writer replacing it between two requests could mix versions: callers then read
    #: one covering range per key)
    snapshot_ranges: bool = False
    #: every call is a network round trip (milliseconds): batches of small values are
    #: never run inline one after another to probe their cost
    remote: bool = False
    #: the contents live in this process only (a pickled copy is another store): tasks
    #: run in other processes would write into copies (``dask.memory.refuse_copied``)
    process_local: bool = False
    #: commits block the calling thread on local IO: writers fan out on every pool thread
    blocking_commits: bool = False
    #: decoded bytes per write batch of the chunk engine (its encoded chunks wait in
    #: memory until sent), None for the engine's default
    write_batch_bytes: int | None = None
    #: ``cache_tokens(keys)`` tells cheaply which version of each value is stored, so
    #: the decoded-chunk cache revalidates entries by it; a store without it reports its
    #: writes (``Store._notify_written``) and cached entries are trusted
    cache_tokens: bool = False
    #: the cache tokens carry file timestamps, trusted only once older than the file
    #: system's timestamp window, which ``timestamp_probe()`` measures
    timestamped_tokens: bool = False
