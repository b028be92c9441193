"""``chunkstore.config``: the settings users set, in zarr-python's spelling.

>>> import chunkstore as cs
>>> cs.config.get("array.write_empty_chunks")
False
>>> with cs.config.set({"array.write_empty_chunks": True}):
...     cs.config.get("array.write_empty_chunks")
True

Keys (dotted, as ``zarr.config``):

* ``array.write_empty_chunks`` (False): store chunks that hold only the fill value.
  True or False only (strings such as ``"no"`` are refused, not guessed at).
* ``array.order`` ("C"): memory order of new arrays, "C" or "F".
* ``array.read_missing_chunks`` (True): a chunk (a shard, of a sharded array) that is not
  stored reads as the fill value; False makes such a read raise ChunkNotFoundError.
* ``array.sharding_coalesce_max_gap_bytes`` (1 MiB), ``array.sharding_coalesce_max_bytes``
  (16 MiB): accepted and reported in ``Array.config`` as zarr-python's keys; chunkstore
  joins the byte ranges of one shard by its store's request cost, not by these.
* ``array.default_compressor`` ("auto"): the compressor(s) of new arrays when none is
  given: "auto" (Blosc lz4 with shuffle), None, or a codec (a numcodecs or chunkstore
  codec object, a name such as ``"zstd"``, a ``{"name": ...}`` / ``{"id": ...}``
  config) / list of them.
* ``threading.max_workers`` (None): threads of the chunk IO pool, a whole number >= 1
  (None: 4 per core, at most 32, or the ``CHUNKSTORE_THREADS`` environment variable).
  Read when the pool is created: set it before the first read or write.
* ``threading.write_bytes`` (32 MiB): chunk bytes one write holds between encoding
  and storing, over all its threads (fewer threads encode at once when chunks are
  large, but never fewer than one per core): a writer's encode buffers hold at most
  ``max(write_bytes, cores x chunk bytes)``.
* ``cache.shard_index_bytes`` (16 MiB): bytes of shard indexes kept per array.
* ``cache.chunk_bytes`` (0: off): budget of the process-wide LRU of decoded chunks
  (``chunkstore.io.cache.chunk_cache``: what it validates and what a foreign writer can make
  stale). Writes through chunkstore invalidate the chunks they touch.
* ``cache.map_bytes`` (0: off): bytes of memory-mapped chunk files ``LocalStore`` keeps
  open between reads (their resident pages count in the process's RSS). 0 unmaps each
  file once read.
* ``metadata.max_bytes`` (64 MiB): the largest metadata document (``zarr.json``,
  ``.zarray``, ``.zattrs``, ``.zmetadata``...) read or written, at least 1 byte.
* ``metadata.max_elements`` (8 Mi = 8388608): the most JSON values a metadata document
  may hold, counted before it is parsed as its objects and arrays plus one per item
  after a comma (strings excluded), a whole number >= 1. Parsing costs up to about
  70 bytes of memory per value: a 29 MiB document of 10 million empty objects would
  take 0.75 GB; it is refused in milliseconds instead. A document over either cap is
  refused (a MetadataError naming it and the key to raise), and so is writing one.

* ``codecs.vlen_min_bytes`` (None: ``CHUNKSTORE_VLEN_MIN_BYTES``, else 64 MiB),
  ``codecs.vlen_ratio`` (None: ``CHUNKSTORE_VLEN_RATIO``, else 64): a chunk of
  variable-length items (strings, bytes) may decode to ``max(vlen_min_bytes, vlen_ratio x
  its stored size)``, no more (``chunkstore.codecs.limits``).

The budgets derived from these keys are read by the other layers from the process's
Runtime (``chunkstore.runtime.current().budgets``), re-read after every change.

Environment variables (read through :func:`environ`, the one place chunkstore reads the
environment; those of the budgets when the Runtime derives them: at first use and after
each change of this config):

* ``CHUNKSTORE_THREADS``: threads of the IO pool when ``threading.max_workers`` is None;
* ``CHUNKSTORE_VLEN_MIN_BYTES``, ``CHUNKSTORE_VLEN_RATIO``: the caps above when their keys
  are None;
* ``CHUNKSTORE_S3_BACKEND``: "fsspec" or "obstore", the backend of plain ``s3://`` URLs
  that do not choose one;
* ``CHUNKSTORE_S3_ENDPOINT``: an S3-compatible endpoint (a MinIO server) for ``s3://`` URLs
  whose options name none (before ``AWS_ENDPOINT_URL_S3`` and ``AWS_ENDPOINT_URL``);
* ``CHUNKSTORE_TRACEBACK``: the CLI shows the traceback of an error (``--traceback``);
* read with the conventions of the tools they belong to: ``AWS_ENDPOINT_URL_S3``,
  ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT`` (obstore's), ``AWS_REGION``,
  ``AWS_DEFAULT_REGION``, ``AWS_PROFILE``, ``AWS_DEFAULT_PROFILE``, ``AWS_CONFIG_FILE``,
  ``AWS_SHARED_CREDENTIALS_FILE`` and the credentials obstore finds itself
  (``AWS_ACCESS_KEY_ID``, ``AWS_WEB_IDENTITY_TOKEN_FILE``,
  ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``, ``AWS_CONTAINER_CREDENTIALS_FULL_URI``),
  which decide whether an s3:// URL can use obstore; ``HDF5_EXTFILE_PREFIX``,
  ``HDF5_EXT_PREFIX``, ``HDF5_VDS_PREFIX`` (where HDF5 looks for the files an HDF5
  source names); ``DASK_SCHEDULER_ADDRESS`` (the CLI's default ``--scheduler``).

The ``array.*`` keys but ``default_compressor`` are also the fields of an
:class:`ArrayConfig`, one array's settings (``config=`` of ``create_array``, ``open_array``,
``Group.require_array``..., and ``Array.config``); keys it leaves out come from here.

Every value is checked by ``config.set`` (``array.default_compressor`` by the codecs,
which register that check with :meth:`Config.add_check`): one of the wrong kind is a ValueError naming
the key and what it takes, and leaves the config unchanged. Set values apply at once; ``config.set`` used as a context manager restores the previous
values on exit. Thread-safe for readers; meant to be set at start-up.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from chunkstore.sizes import whole_number

_DEFAULTS: dict[str, Any] = {
    "array.write_empty_chunks": False,
    "array.order": "C",
    "array.read_missing_chunks": True,
    "array.sharding_coalesce_max_gap_bytes": 1 << 20,
    "array.sharding_coalesce_max_bytes": 16 << 20,
    "array.default_compressor": "auto",
    "threading.max_workers": None,
    "threading.write_bytes": 32 * 2**20,
    "cache.shard_index_bytes": 16 * 2**20,
    "cache.chunk_bytes": 0,
    "cache.map_bytes": 0,
    "metadata.max_bytes": 64 * 2**20,
    "metadata.max_elements": 8 * 2**20,
    "codecs.vlen_min_bytes": None,
    "codecs.vlen_ratio": None,
}
_MISSING = object()
#: the environment variables chunkstore reads (see the module docstring)
ENVIRONMENT = frozenset({
    "CHUNKSTORE_THREADS", "CHUNKSTORE_VLEN_MIN_BYTES", "CHUNKSTORE_VLEN_RATIO",
    "CHUNKSTORE_S3_BACKEND", "CHUNKSTORE_S3_ENDPOINT", "CHUNKSTORE_TRACEBACK",
    "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_REGION",
    "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "HDF5_EXTFILE_PREFIX", "HDF5_EXT_PREFIX", "HDF5_VDS_PREFIX", "DASK_SCHEDULER_ADDRESS",
})


def environ(name: str) -> str | None:
    """The environment variable ``name`` now (None when unset), one of
    :data:`ENVIRONMENT` (another name is a KeyError: every variable read is listed)."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name!r} is not an environment variable chunkstore reads; "
                       "list it in chunkstore.config.ENVIRONMENT and its docstring")
    return os.environ.get(name)


class _Restore:
    """What ``config.set`` returns: the change is already applied; ``with`` undoes it."""

    def __init__(self, config: Config, previous: dict[str, Any]) -> None:
        self._config, self._previous = config, previous

    def __enter__(self) -> Config:
        return self._config

    def __exit__(self, *exc: object) -> None:
        self._config._update(self._previous)


def _bytes_value(key: str, value: Any) -> int:
    """A ``*_bytes`` key: a number of bytes or a size such as ``"256MiB"``."""
    return whole_number(value, f"chunkstore config {key!r} must be a number of bytes "
                        f"(>= 0) or a size such as '256MiB', got {value!r}", sizes=True)


def _positive_bytes(key: str, value: Any) -> int:
    """A cap in bytes that must let something through: >= 1, or a size string."""
    return whole_number(value, f"chunkstore config {key!r} must be a number of bytes "
                        f"(>= 1) or a size such as '64MiB', got {value!r}", sizes=True,
                        minimum=1)


def _positive_count(key: str, value: Any) -> int:
    """A cap on a count: a whole number >= 1."""
    return whole_number(value, f"chunkstore config {key!r} must be a whole number >= 1, "
                        f"got {value!r}", minimum=1)


def _flag(key: str, value: Any) -> bool:
    """True or False (a NumPy bool too). Strings are refused, not parsed: ``"no"`` and
    ``"false"`` are truthy to ``bool()``, so guessing either way could store what the
    user did not mean; 0/1 are refused too (a typo for a count is likelier)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ValueError(f"chunkstore config {key!r} must be True or False, got {value!r}")


def _order(key: str, value: Any) -> str:
    """The memory order of new arrays: "C" or "F" (as array creation takes it)."""
    if isinstance(value, str) and value in ("C", "F"):
        return value
    raise ValueError(f"chunkstore config {key!r} must be 'C' or 'F', got {value!r}")


def _workers(key: str, value: Any) -> int | None:
    """None (the default thread count) or a whole number of threads >= 1."""
    if value is None:
        return None
    return whole_number(value, f"chunkstore config {key!r} must be None (the default "
                        f"thread count) or a whole number of threads >= 1, got {value!r}",
                        minimum=1)


def _vlen(key: str, value: Any) -> int | None:
    """None (the environment's, else the built-in cap) or a whole number >= 1."""
    if value is None:
        return None
    return whole_number(value, f"chunkstore config {key!r} must be None or a whole number "
                        f">= 1, got {value!r}", minimum=1)


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "array.write_empty_chunks": _flag,
    "array.read_missing_chunks": _flag,
    "array.order": _order,
    "threading.max_workers": _workers,
    "metadata.max_bytes": _positive_bytes,
    "metadata.max_elements": _positive_count,
    "codecs.vlen_min_bytes": _vlen,
    "codecs.vlen_ratio": _vlen,
}


class Config:
    """A flat mapping of dotted keys to values with defaults (see the module docstring)."""

    def __init__(self, defaults: Mapping[str, Any]) -> None:
        self._defaults = dict(defaults)
        self._values = dict(defaults)
        self._lock = threading.Lock()
        self._array_settings: tuple[tuple[Any, ...], ArrayConfig] | None = None
        self._checks = dict(_CHECKS)
        #: bumped by every change: what was derived from the values (the Runtime's
        #: budgets) is re-read when it moves
        self.version = 0

    def add_check(self, key: str, check: Callable[[str, Any], Any]) -> None:
        """Make ``check(key, value)`` judge the values of ``key`` (returning the value as
        kept, or raising ValueError): how a layer above checks what only it can judge
        (the codecs, ``array.default_compressor``) without this module importing it."""
        self._checks[self._check(key)] = check

    def _checked(self, key: str, value: Any) -> Any:
        """``value`` as the setting ``key`` takes it (see the module docstring), or a
        ValueError naming the key and what it takes (rather than a failure, or a silent
        misreading, in the next read or write)."""
        check = self._checks.get(key)
        if check is None and key.endswith("_bytes"):
            check = _bytes_value
        return value if check is None else check(key, value)

    def _update(self, values: Mapping[str, Any]) -> None:
        with self._lock:
            self._values.update(values)
            self.version += 1

    def array_settings(self) -> ArrayConfig:
        """The ``ArrayConfig`` of the current ``array.*`` values (what an array handle made
        without ``config=`` gets), built once per set of values: every member a group
        lists is a handle."""
        values = self._values
        key = tuple(values[f"array.{name}"] for name in _ARRAY_FIELDS)
        cached = self._array_settings
        if cached is None or cached[0] != key:
            cached = self._array_settings = (key, ArrayConfig(*key))
        return cached[1]

    def _check(self, key: str) -> str:
        if key not in self._defaults:
            raise KeyError(f"unknown chunkstore config key {key!r}; known keys: "
                           f"{sorted(self._defaults)}")
        return key

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The value of ``key``; ``default`` (when given) for an unknown key, else KeyError.
        A section name (``"array"``) gives a dict of its keys."""
        if key in self._values:
            return self._values[key]
        section = {k[len(key) + 1:]: v for k, v in self._values.items() if k.startswith(key + ".")}
        if section:
            return section
        if default is not _MISSING:
            return default
        return self._values[self._check(key)]

    def set(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> _Restore:
        """Set values (a mapping of dotted keys, or keyword arguments with ``__`` for the
        dots); usable as a context manager that restores the old values on exit."""
        changes = {**(values or {}), **{k.replace("__", "."): v for k, v in kwargs.items()}}
        changes = {k: self._checked(self._check(k), v) for k, v in changes.items()}
        with self._lock:
            previous = {self._check(k): self._values[k] for k in changes}
            self._values.update(changes)
            self.version += 1
        return _Restore(self, previous)

    def reset(self) -> None:
        """Back to the defaults."""
        with self._lock:
            self._values = dict(self._defaults)
            self.version += 1

    def __repr__(self) -> str:
        return f"chunkstore.config({self._values!r})"


config = Config(_DEFAULTS)


# -- one array's settings ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ArrayConfig:
    """The settings of one array handle, with zarr-python's names (its ``ArrayConfig``):

    * ``order``: "C" or "F", the memory order of the arrays a read returns (and of a new
      array's chunks);
    * ``write_empty_chunks``: store chunks that hold only the fill value (else they are
      deleted);
    * ``read_missing_chunks``: a chunk (of a sharded array: a shard) that is not stored
      reads as the fill value; False: a read that needs one raises ChunkNotFoundError;
    * ``sharding_coalesce_max_gap_bytes``, ``sharding_coalesce_max_bytes``: kept and
      reported; chunkstore joins a shard's byte ranges by its store's request cost.

    A bad value is a ValueError naming the field. ``ArrayConfig.from_dict`` takes a
    partial dict (the ``config=`` argument); the rest comes from ``chunkstore.config``.

    >>> ArrayConfig.from_dict({"order": "F"}).order
    'F'
    """

    order: str
    write_empty_chunks: bool
    read_missing_chunks: bool = True
    sharding_coalesce_max_gap_bytes: int = 1 << 20
    sharding_coalesce_max_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _FIELD_CHECKS[f.name](f.name, getattr(self, f.name)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArrayConfig:
        """An ArrayConfig from some of its fields, the others from ``chunkstore.config``
        (``"array.<field>"``); an unknown key is a TypeError (as zarr-python)."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = set(data) - set(names)
        if unknown:
            raise TypeError(f"Unknown array config keys: {sorted(unknown)}. Valid keys are "
                            f"{names}.")
        return cls(**{n: data[n] if n in data else config.get(f"array.{n}") for n in names})

    def to_dict(self) -> dict[str, Any]:
        """Every field, by name."""
        return dataclasses.asdict(self)


def _config_flag(key: str, value: Any) -> bool:
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ValueError(f"array config {key!r} must be True or False: Expected instance of "
                     f"bool, got {value!r}")


def _config_order(key: str, value: Any) -> str:
    if isinstance(value, str) and value in ("C", "F"):
        return value
    raise ValueError(f"array config {key!r} must be 'C' or 'F', got {value!r}")


def _config_bytes(key: str, value: Any) -> int:
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(f"array config {key!r} must be a number of bytes >= 0: Expected int, "
                     f"got {value!r}")


_FIELD_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "order": _config_order,
    "write_empty_chunks": _config_flag,
    "read_missing_chunks": _config_flag,
    "sharding_coalesce_max_gap_bytes": _config_bytes,
    "sharding_coalesce_max_bytes": _config_bytes,
}


_ARRAY_FIELDS = tuple(f.name for f in dataclasses.fields(ArrayConfig))


def array_config(given: Any = None, write_empty_chunks: bool | None = None,
                 order: str | None = None) -> ArrayConfig:
    """One array's settings from a ``config=`` argument (None, a dict of some fields or an
    ArrayConfig) and the explicit ``write_empty_chunks=`` / ``order=`` arguments, which
    win over it. TypeError for anything else, or for an unknown key."""
    if given is None:
        parsed = config.array_settings()
    elif isinstance(given, ArrayConfig):
        parsed = given
    elif isinstance(given, Mapping):
        parsed = ArrayConfig.from_dict(given)
    else:
        raise TypeError(f"config must be a dict of array settings or an ArrayConfig, got "
                        f"{type(given).__name__}: {given!r}")
    changes: dict[str, Any] = {}
    if write_empty_chunks is not None and write_empty_chunks is not parsed.write_empty_chunks:
        changes["write_empty_chunks"] = write_empty_chunks
    if order is not None and order != parsed.order:
        changes["order"] = order
    return dataclasses.replace(parsed, **changes) if changes else parsed
