"""Which backend serves an ``s3://`` URL: obstore (ObstoreStore) when it is installed and
can take the ``storage_options``, else fsspec / s3fs (an :class:`S3FsspecStore`, which
says why in ``backend_reason`` and its repr).

The choice, first that applies:

1. ``storage_options={"backend": "fsspec" | "obstore"}``, else the
   ``CHUNKSTORE_S3_BACKEND`` environment variable: that backend, whatever it costs
   (obstore then refuses options it cannot express with a TypeError naming them);
2. obstore is not installed -> fsspec;
3. a path with an empty segment (``s3://b/x//y``: s3fs writes the keys ``x//y/...``,
   obstore refuses them), or an option obstore cannot express
   (``obstore_options.untranslatable``: ``profile``, ``s3_additional_kwargs``, a botocore
   ``Config``...) -> fsspec;
4. credentials that only botocore finds (a profile named by ``AWS_PROFILE``, keys in
   ``~/.aws/credentials`` or ``~/.aws/config`` and none in the options or the
   environment: ``obstore_options.credentials_refusal``) -> fsspec;
5. AWS itself (no endpoint) and no region anywhere (``obstore_options.region_refusal``:
   obstore would not find a bucket outside us-east-1) -> fsspec;
6. otherwise obstore, which read, wrote and opened faster in every row of
   ``benchmarks/bench_s3.py``.

URL schemes: ``s3://`` and its aliases (``s3a://``, ``s3n://``: ``location``'s canonical
scheme ``s3``), plain only; chained URLs (``zip::s3://...``, ``simplecache::s3://...``)
and every other scheme are fsspec's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chunkstore.config import environ
from chunkstore.storage.errors import InvalidStoreError, MissingBackendError
from chunkstore.storage.fsspec.setup import protocols
from chunkstore.storage.fsspec.store import FsspecStore
from chunkstore.storage.location import canonical_scheme
from chunkstore.storage.obstore import setup as obstore_setup
from chunkstore.storage.obstore.options import (
    credentials_refusal,
    region_refusal,
    untranslatable,
)
from chunkstore.storage.obstore.store import ObstoreStore

#: the environment variable choosing the backend of s3:// URLs that do not name one
BACKEND_VARIABLE = "CHUNKSTORE_S3_BACKEND"
BACKENDS = ("fsspec", "obstore")


def is_plain_s3(url: str) -> bool:
    """Whether ``url`` is one ``s3://`` URL (or ``s3a://``, ``s3n://``), not chained."""
    chain = protocols(url)
    return len(chain) == 1 and "://" in url and canonical_scheme(chain[0]) == "s3"


def _checked(backend: Any, url: str) -> str:
    name = str(backend).lower()
    if name not in BACKENDS:
        raise InvalidStoreError(f"{url}: unknown storage backend {backend!r} (known: "
                                f"{', '.join(BACKENDS)})")
    return name


def obstore_refusal(url: str, options: Mapping[str, Any]) -> str | None:
    """Why obstore cannot serve the s3:// ``url`` with ``options`` (None: it can)."""
    if not obstore_setup.available():
        return "obstore is not installed"
    if "//" in url.split("://", 1)[1].rstrip("/"):
        return "obstore cannot take a path with an empty segment ('//'), which s3fs keeps"
    unknown = untranslatable(options)
    if unknown:
        return f"obstore cannot take the storage options {sorted(unknown)}"
    refusal = credentials_refusal(options)
    if refusal:
        return f"obstore does not read AWS profiles ({refusal})"
    refusal = region_refusal(url, options)
    if refusal:
        return f"obstore cannot find the bucket's region: {refusal}"
    return None


def choose(url: str, options: Mapping[str, Any], requested: Any = None) -> tuple[str, str]:
    """``(backend, why)`` for a remote ``url``: ``"obstore"`` or ``"fsspec"``, and the
    reason in words (see the module docstring). ``requested``: the ``backend`` option.
    A ``why`` starting with "obstore cannot" / "obstore does not" is a fallback: obstore
    is installed and was not asked against, but cannot serve these options."""
    s3 = is_plain_s3(url)
    if requested is not None:
        backend = _checked(requested, url)
        if backend == "obstore" and not s3:
            raise InvalidStoreError(f"{url}: the obstore backend takes plain s3:// URLs only; "
                                    "other URLs use fsspec")
        return backend, f"storage_options backend={backend!r}"
    if not s3:
        return "fsspec", "fsspec serves every URL but plain s3:// ones"
    variable = environ(BACKEND_VARIABLE)
    if variable:
        return _checked(variable, url), f"{BACKEND_VARIABLE}={variable}"
    refusal = obstore_refusal(url, options)
    if refusal:
        return "fsspec", refusal
    return "obstore", "the default of s3:// URLs when obstore is installed"


def is_fallback(why: str) -> bool:
    """Whether :func:`choose`'s ``why`` says obstore could not serve the options."""
    return why.startswith(("obstore cannot", "obstore does not"))


class S3FsspecStore(FsspecStore):
    """An FsspecStore on an ``s3://`` URL that ``resolve_store`` gave to fsspec rather
    than obstore; ``backend_reason`` says why, and so does the repr when obstore could
    not take the options (a fallback; not when fsspec was asked for or obstore is not
    installed, where the repr is FsspecStore's). It behaves as, and compares equal to,
    an FsspecStore on the same URL and options."""

    #: which client serves the store (ObstoreStore's says "obstore")
    backend = "fsspec"

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None,
                 read_only: bool = False, backend_reason: str = "") -> None:
        try:
            super().__init__(url, storage_options, read_only)
        except MissingBackendError as e:
            if not backend_reason:
                raise
            raise MissingBackendError(f"{e} ({backend_reason})") from None
        self.backend_reason = backend_reason

    def _description(self) -> tuple[Any, ...]:
        return (*super()._description(), self.backend_reason)

    def __repr__(self) -> str:
        if not is_fallback(self.backend_reason):
            return super().__repr__()
        return f"FsspecStore({self.url!r}, backend='fsspec', " \
               f"backend_reason={self.backend_reason!r})"


def s3_store(url: str, options: dict[str, Any], read_only: bool, requested: Any = None
             ) -> Any:
    """The store of a remote ``url`` (see :func:`choose`): an ObstoreStore, an
    S3FsspecStore (plain s3:// URLs) or an FsspecStore (every other URL)."""
    backend, why = choose(url, options, requested)
    if backend == "obstore":
        return ObstoreStore(url, options, read_only=read_only)
    if is_plain_s3(url):
        return S3FsspecStore(url, options, read_only, backend_reason=why)
    return FsspecStore(url, options, read_only=read_only)
