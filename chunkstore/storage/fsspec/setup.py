"""What an fsspec URL needs before a filesystem is made: its protocols, their packages,
and the S3 endpoint.

S3 endpoint, first found wins: ``endpoint_url`` in ``storage_options`` (top level or in
``client_kwargs``); the ``CHUNKSTORE_S3_ENDPOINT`` environment variable; botocore's own
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``. The variables are read when the store
is created and the endpoint is then part of its options, so a pickled store reaches
the same server from a worker whose environment lacks them.
"""

from __future__ import annotations

import copy
from typing import Any

from chunkstore.config import environ
from chunkstore.storage.errors import InvalidStoreError, MissingBackendError
from chunkstore.storage.location import canonical_scheme

#: the environment variable naming an S3-compatible endpoint (e.g. a MinIO server)
ENDPOINT_VARIABLE = "CHUNKSTORE_S3_ENDPOINT"
_ENDPOINT_FALLBACKS = (ENDPOINT_VARIABLE, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def protocols(url: str) -> list[str]:
    """The protocols of a (possibly chained, ``zip::s3://...``) URL, outermost first; a
    bare name before ``::`` is a protocol, a last segment without ``://`` a local path."""
    segments = url.split("::")
    found = []
    for i, segment in enumerate(segments):
        if "://" in segment:
            found.append(segment.split("://", 1)[0])
        else:
            found.append(segment if i < len(segments) - 1 else "file")
    return found


def check_backends(url: str) -> None:
    """Raise a one-line error when a protocol of ``url`` is unknown to fsspec or needs a
    package that is not installed (naming the package and how to install it)."""
    import fsspec
    from fsspec.registry import known_implementations

    for protocol in protocols(url):
        try:
            fsspec.get_filesystem_class(protocol)
        except ValueError:
            raise InvalidStoreError(f"{url}: unknown URL protocol {protocol!r}") from None
        except ImportError:
            known = known_implementations.get(protocol, {})
            package = known.get("class", protocol).split(".")[0]
            hint = known.get("err", "")
            raise MissingBackendError(
                f"{url}: {protocol}:// URLs need the package {package!r}, which is not "
                f"installed (pip install {package})" + (f"; {hint}" if hint else "")) from None


def explicit_endpoint(options: dict[str, Any]) -> str | None:
    """The endpoint named in s3fs ``storage_options``, if any."""
    return options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url")


def with_endpoint(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options``, plus the S3 endpoint of the environment when ``url`` is a plain S3
    URL and ``options`` name none (see the module docstring)."""
    chain = protocols(url)
    if len(chain) != 1 or canonical_scheme(chain[0]) != "s3" or explicit_endpoint(options):
        return options
    for variable in _ENDPOINT_FALLBACKS:
        endpoint = environ(variable)
        if endpoint:
            options = copy.deepcopy(options)
            options.setdefault("client_kwargs", {})["endpoint_url"] = endpoint
            return options
    return options
