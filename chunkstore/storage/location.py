"""One spelling per physical place for remote stores: the ``location()`` of FsspecStore and
ObstoreStore.

Two stores whose locations are equal show the same objects; the overlap check (a copy,
rechunk or transpose onto its own source) and the chunk cache compare locations
literally, so every spelling of one place must give one location:

* URL schemes that fsspec registers for the same filesystem are one scheme
  (``s3a://`` and ``s3n://`` are ``s3://``; ``gcs://`` is ``gs://``; ``az://`` and
  ``abfss://`` are ``abfs://``), see :data:`SCHEME_ALIASES`;
* the endpoint URL has a lower-case scheme and host, no default port (``http:80``,
  ``https:443``) and no trailing slash; where it was given (``endpoint_url`` at the top
  level of ``storage_options`` or in ``client_kwargs``, or an environment variable that
  ``fsspec_setup.with_endpoint`` copied into the options) does not matter;
* the path within the bucket has no trailing (and, on object stores, no leading)
  slashes. Repeated slashes inside it are kept: s3fs writes ``s3://b/x//y`` to the
  keys ``x//y/...``, other objects than those of ``s3://b/x/y`` (obstore refuses such
  paths), so the chunk cache must not take one for the other. (The overlap check
  compares path components, so it still refuses a copy between the two: too careful,
  never destructive.)

Host names are not resolved: ``localhost`` and ``127.0.0.1`` stay two places. The one
exception: AWS's own S3 endpoints (``https://s3.amazonaws.com``,
``https://s3.eu-west-1.amazonaws.com``...) are "no endpoint", since every bucket of
AWS's commercial partition is reached through any of them.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

#: other names of one filesystem's scheme -> the name used in locations (fsspec
#: registers ``s3fs.S3FileSystem.protocol == ("s3", "s3a")``, gcsfs ``("gs", "gcs")``,
#: adlfs ``("abfs", "az", "abfss")``; ``s3n`` is Hadoop's old name of S3)
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "az": "abfs", "abfss": "abfs"}
#: schemes whose first path component is a bucket (container): no leading slash
_BUCKETS = {"s3", "gs", "abfs"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SLASHES = re.compile("/+")
#: the endpoints of AWS's commercial partition (global, regional, dual-stack), which
#: share one bucket namespace with "no endpoint"; China and GovCloud are other partitions
_AWS_ENDPOINT = re.compile(
    r"^https://s3(?:[.-](?!us-gov)(?:dualstack\.)?[a-z]{2}-[a-z]+-\d+)?\.amazonaws\.com$")


def canonical_scheme(scheme: str) -> str:
    """The one name of a URL scheme (lower-case, aliases mapped: ``s3a`` -> ``s3``)."""
    scheme = scheme.lower()
    return SCHEME_ALIASES.get(scheme, scheme)


def canonical_path(path: str, scheme: str = "") -> str:
    """``path`` without trailing slashes (and without leading ones when ``scheme`` names
    an object store, whose paths start with the bucket); inner ``//`` are kept (see the
    module docstring)."""
    path = path.rstrip("/")
    if canonical_scheme(scheme) in _BUCKETS:
        path = path.lstrip("/")
    return path


def canonical_endpoint(endpoint: Any) -> str | None:
    """The endpoint URL with a lower-case scheme and host, no default port and no
    trailing slash (None when none is given)."""
    if endpoint is None:
        return None
    text = str(endpoint).strip()
    if not text:
        return None
    if "://" not in text:  # "host:port[/path]": lower-case the host part only
        host, sep, rest = text.partition("/")
        return (host.lower().rstrip(".") + sep + _SLASHES.sub("/", rest)).rstrip("/")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a number: keep the text as given
        return text.rstrip("/")
    host = (parts.hostname or "").rstrip(".")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    out = f"{scheme}://{netloc}{_SLASHES.sub('/', parts.path).rstrip('/')}"
    if parts.query:
        out += "?" + parts.query
    if parts.fragment:
        out += "#" + parts.fragment
    return out


def canonical_url(url: str) -> str:
    """A (possibly chained, ``zip::s3a://b//x.zip``) URL with canonical schemes and
    paths, for stores whose location is the whole URL."""
    segments = url.split("::")
    out = []
    for i, segment in enumerate(segments):
        if "://" in segment:
            scheme, _, rest = segment.partition("://")
            scheme = canonical_scheme(scheme)
            out.append(f"{scheme}://{canonical_path(rest, scheme)}")
        elif i < len(segments) - 1:
            out.append(canonical_scheme(segment))
        else:
            out.append(segment)
    return "::".join(out)


def remote_location(scheme: str, path: str, endpoint: Any) -> tuple[str, str, str | None]:
    """``(scheme, path, endpoint)``, each canonical: the location of a remote store.
    ``path`` is the root within the filesystem (``bucket/prefix``), or the whole URL
    when ``scheme`` is a chain such as ``"zip::s3a"``."""
    chain = [canonical_scheme(s) for s in scheme.split("::")]
    where = canonical_path(path, chain[0]) if len(chain) == 1 else canonical_url(path)
    endpoint = canonical_endpoint(endpoint)
    if chain[-1] == "s3" and endpoint is not None and _AWS_ENDPOINT.match(endpoint):
        endpoint = None  # AWS's own endpoints all reach its one bucket namespace
    return "::".join(chain), where, endpoint
