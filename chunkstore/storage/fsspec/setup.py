"""What FsspecStore works out from its URL: its protocols (an archive's are read-only),
their packages, the S3 endpoint, the filesystem and the store's location.

S3 endpoint, first found wins: ``endpoint_url`` in ``storage_options`` (top level or in
``client_kwargs``); the ``CHUNKSTORE_S3_ENDPOINT`` environment variable; botocore's own
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``. The variables are read when the store
is created and the endpoint is then part of its options, so a pickled store reaches
the same server from a worker whose environment lacks them.
"""

from __future__ import annotations

import copy
import os
import zipfile
from typing import Any

from chunkstore.config import environ
from chunkstore.storage.errors import BadArchiveError, InvalidStoreError, MissingBackendError
from chunkstore.storage.location import canonical_scheme, remote_location

#: the environment variable naming an S3-compatible endpoint (e.g. a MinIO server)
ENDPOINT_VARIABLE = "CHUNKSTORE_S3_ENDPOINT"
_ENDPOINT_FALLBACKS = (ENDPOINT_VARIABLE, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: outer protocols of archives that fsspec can only read
_ARCHIVES = {"zip", "tar", "libarchive"}


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


def is_archive(url: str) -> bool:
    """Whether ``url`` names a file inside an archive (``zip::...``), which fsspec can only
    read."""
    return protocols(url)[0] in _ARCHIVES


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


def make_filesystem(url: str, options: dict[str, Any]) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the root path on it; a broken archive is a
    BadArchiveError and a missing package a MissingBackendError, naming the URL."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **options)
    except zipfile.BadZipFile as e:
        raise BadArchiveError(f"{url}: not a zip archive, or a truncated one ({e})") from None
    except ImportError as e:
        raise MissingBackendError(f"{url}: a package this URL needs is missing ({e})") from None


def store_location(url: str, root: str, options: dict[str, Any]) -> tuple[Any, ...]:
    """The location of the store of ``url`` at ``root`` (its path on the filesystem):
    ``(protocol, root, endpoint)``, one spelling per place (``remote_location``: ``s3a``
    is ``s3``, the endpoint normalised), the same as an ObstoreStore's on the same
    bucket; ``("file", real path)`` for local files, so that a LocalStore of the same
    directory has the same location."""
    chain = protocols(url)
    if chain == ["file"] or chain == ["local"]:
        return ("file", os.path.realpath(root))
    return remote_location("::".join(chain), root if len(chain) == 1 else url,
                           explicit_endpoint(options))
