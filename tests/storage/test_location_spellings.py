"""One location per physical place for remote stores (``chunkstore.storage.location``):
the normaliser's table of spellings, FsspecStore and ObstoreStore agreeing, and, on the
moto S3 server, copies onto the source through another spelling refused (source intact)
while other buckets, paths and endpoints are not refused."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.errors import SameLocationError
from chunkstore.io.overlap import overlaps, refuse_onto_itself
from chunkstore.storage.fsspec.setup import ENDPOINT_VARIABLE
from chunkstore.storage.fsspec.store import FsspecStore
from chunkstore.storage.location import (
    canonical_endpoint,
    canonical_path,
    canonical_scheme,
    canonical_url,
    remote_location,
)
from chunkstore.storage.resolve import resolve_store
from tests.conftest import S3_BACKENDS, new_bucket, s3_storage_options

# -- the normaliser ------------------------------------------------------------------------
SAME_ENDPOINTS = [
    ("http://127.0.0.1:9000", "http://127.0.0.1:9000/"),
    ("http://127.0.0.1:9000", "http://127.0.0.1:9000//"),
    ("http://127.0.0.1:9000", "HTTP://127.0.0.1:9000"),
    ("http://minio.example.org", "http://MinIO.Example.ORG/"),
    ("http://minio.example.org", "http://minio.example.org:80"),
    ("https://s3.example.org", "https://s3.example.org:443/"),
    ("https://s3.example.org", "https://s3.example.org."),
    ("http://[::1]:9000", "http://[::1]:9000/"),
    ("http://host/proxy/s3", "http://HOST/proxy/s3/"),
    ("minio:9000", "MINIO:9000/"),
    (None, ""),
]
DIFFERENT_ENDPOINTS = [
    ("http://127.0.0.1:9000", "http://localhost:9000"),  # not resolved: two places
    ("http://127.0.0.1:9000", "http://127.0.0.1:9001"),
    ("http://127.0.0.1:9000", "https://127.0.0.1:9000"),
    ("http://s3.example.org", "http://s3.example.org:443"),
    ("https://s3.example.org", "https://s3.example.org:80"),
    ("http://host/proxy/s3", "http://host/proxy/S3"),  # paths are case-sensitive
    ("http://host/a", "http://host/b"),
    (None, "http://127.0.0.1:9000"),
]


@pytest.mark.parametrize("a,b", SAME_ENDPOINTS, ids=str)
def test_endpoint_spellings_are_one(a, b):
    assert canonical_endpoint(a) == canonical_endpoint(b)
    assert canonical_endpoint(canonical_endpoint(a)) == canonical_endpoint(a)  # idempotent


@pytest.mark.parametrize("a,b", DIFFERENT_ENDPOINTS, ids=str)
def test_different_endpoints_stay_different(a, b):
    assert canonical_endpoint(a) != canonical_endpoint(b)


def test_endpoint_canonical_form():
    assert canonical_endpoint("HTTP://MinIO:80//") == "http://minio"
    assert canonical_endpoint("https://H:8443/x/") == "https://h:8443/x"
    assert canonical_endpoint(None) is None


@pytest.mark.parametrize("alias,name", [("s3", "s3"), ("s3a", "s3"), ("s3n", "s3"),
                                        ("S3A", "s3"), ("gs", "gs"), ("gcs", "gs"),
                                        ("abfs", "abfs"), ("az", "abfs"), ("abfss", "abfs"),
                                        ("memory", "memory"), ("http", "http")])
def test_scheme_aliases(alias, name):
    assert canonical_scheme(alias) == name


def test_scheme_aliases_agree_with_fsspec_registry():
    """Every installed fsspec class that registers several protocols for one object store
    maps them to the same canonical name."""
    import fsspec

    for protocol in ("s3", "s3a", "gs", "gcs", "abfs", "az"):
        try:
            cls = fsspec.get_filesystem_class(protocol)
        except (ImportError, ValueError):
            continue
        names = (cls.protocol,) if isinstance(cls.protocol, str) else cls.protocol
        assert len({canonical_scheme(n) for n in names}) == 1, names


@pytest.mark.parametrize("a,b,same", [
    ("b/x.zarr", "b/x.zarr/", True),
    ("b/x.zarr", "/b/x.zarr", True),
    ("b/x.zarr", "b/x.zarr//", True),
    ("b/x.zarr", "b/y.zarr", False),
    ("b/x.zarr", "c/x.zarr", False),
    ("b/x.zarr", "b/X.zarr", False),
    # s3fs writes s3://b/x//y to the keys x//y/...: other objects than x/y's
    ("b/x/y", "b/x//y", False),
])
def test_s3_paths(a, b, same):
    assert (canonical_path(a, "s3") == canonical_path(b, "s3")) is same


@pytest.mark.parametrize("a,b", [
    (("s3", "b/x", "http://h:9000"), ("s3a", "b/x/", "HTTP://H:9000/")),
    (("s3", "b/x", None), ("s3n", "/b/x", "")),
    (("zip::s3", "zip::s3://b/a.zip", None), ("zip::s3a", "zip::s3a://b/a.zip/", None)),
])
def test_remote_location_spellings(a, b):
    assert remote_location(*a) == remote_location(*b)


def test_canonical_url_of_chains():
    assert canonical_url("zip::s3a://b/a.zip/") == "zip::s3://b/a.zip"
    assert canonical_url("simplecache::gcs://b/x") == "simplecache::gs://b/x"


# -- the stores: no I/O -------------------------------------------------------------------
EP = "http://127.0.0.1:9000"


def _opts(**kw):
    return {"key": "k", "secret": "s", **kw}


STORE_SPELLINGS = {
    "plain": ("s3://b/x.zarr", _opts(client_kwargs={"endpoint_url": EP})),
    "s3a": ("s3a://b/x.zarr", _opts(client_kwargs={"endpoint_url": EP})),
    "url-trailing-slash": ("s3://b/x.zarr/", _opts(client_kwargs={"endpoint_url": EP})),
    "endpoint-slash": ("s3://b/x.zarr", _opts(client_kwargs={"endpoint_url": EP + "/"})),
    "endpoint-top-level": ("s3://b/x.zarr", _opts(endpoint_url=EP)),
    "endpoint-upper": ("s3://b/x.zarr", _opts(endpoint_url=EP.upper())),
}


@pytest.mark.parametrize("spelling", sorted(STORE_SPELLINGS))
def test_fsspec_store_spellings_one_location(spelling):
    url, options = STORE_SPELLINGS[spelling]
    plain = FsspecStore(*STORE_SPELLINGS["plain"])
    assert FsspecStore(url, options).location() == plain.location() == ("s3", "b/x.zarr", EP)


@pytest.mark.parametrize("variable", [ENDPOINT_VARIABLE, "AWS_ENDPOINT_URL_S3",
                                      "AWS_ENDPOINT_URL"])
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_endpoint_from_environment_same_location(monkeypatch, variable, backend):
    for name in (ENDPOINT_VARIABLE, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, EP + "/")
    store = _store(backend, "s3a://b/x.zarr", _opts())
    assert store.location() == FsspecStore(*STORE_SPELLINGS["plain"]).location()


def _store(backend, url, options):
    if backend == "obstore":
        pytest.importorskip("obstore")
        from chunkstore.storage.obstore.store import ObstoreStore
        return ObstoreStore(url, options)
    return FsspecStore(url, options)


@pytest.mark.parametrize("spelling", sorted(STORE_SPELLINGS))
def test_obstore_and_fsspec_agree(spelling):
    url, options = STORE_SPELLINGS[spelling]
    ob = _store("obstore", url, options)
    for other in STORE_SPELLINGS.values():
        assert ob.location() == FsspecStore(*other).location()


@pytest.mark.parametrize("key", ["endpoint", "aws_endpoint", "AWS_ENDPOINT_URL",
                                 "aws_endpoint_url_s3"])
def test_obstore_native_endpoint_config_counts(key):
    ob = _store("obstore", "s3://b/x.zarr", _opts(config={key: EP + "/"}))
    assert ob.location() == FsspecStore(*STORE_SPELLINGS["plain"]).location()


def test_obstore_explicit_endpoint_beats_environment(monkeypatch):
    """obstore itself ranks AWS_ENDPOINT_URL_S3 above a configured endpoint; the store
    pins the explicit one (what FsspecStore / botocore use and what location() says)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://elsewhere:1")
    ob = _store("obstore", "s3://b/x.zarr", _opts(endpoint_url=EP))
    assert ob.endpoint == EP
    assert ob._kwargs["config"]["aws_endpoint_url_s3"] == EP


def test_obstore_own_environment_variable_counts(monkeypatch):
    for name in (ENDPOINT_VARIABLE, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT", EP)  # read by obstore, not by botocore
    ob = _store("obstore", "s3://b/x.zarr", _opts())
    assert ob.location() == ("s3", "b/x.zarr", EP)
    assert FsspecStore("s3://b/x.zarr", _opts()).location() == ("s3", "b/x.zarr", None)


@pytest.mark.parametrize("a,b", [
    (("s3://b/x.zarr", EP), ("s3://c/x.zarr", EP)),
    (("s3://b/x.zarr", EP), ("s3://b/y.zarr", EP)),
    (("s3://b/x.zarr", EP), ("s3://b/x.zarr2", EP)),
    (("s3://b/x.zarr", EP), ("s3://b/x.zarr", "http://127.0.0.1:9001")),
    (("s3://b/x.zarr", EP), ("s3://b/x.zarr", "http://localhost:9000")),
    (("s3://b/x.zarr", EP), ("s3://b/x.zarr", None)),
    (("s3://b/x.zarr", EP), ("gs://b/x.zarr", None)),
])
@pytest.mark.parametrize("backends", [("fsspec", "fsspec"), ("fsspec", "obstore")])
def test_different_places_do_not_overlap(a, b, backends):
    if b[0].startswith("gs://"):
        pytest.importorskip("gcsfs")
        backends = ("fsspec", "fsspec")
    sa = _store(backends[0], a[0], _opts(endpoint_url=a[1]) if a[1] else _opts())
    sb = _store(backends[1], b[0], _opts(endpoint_url=b[1]) if b[1] else _opts())
    assert sa.location() != sb.location()
    assert not overlaps(sa, "", sb, "") and not overlaps(sb, "", sa, "")


# -- end to end on the moto server ---------------------------------------------------------
def _spellings(url, options):
    endpoint = options["client_kwargs"]["endpoint_url"]
    slash = copy.deepcopy(options)
    slash["client_kwargs"]["endpoint_url"] = endpoint + "/"
    upper = copy.deepcopy(options)
    upper["client_kwargs"]["endpoint_url"] = endpoint.replace("http://", "HTTP://")
    top = {k: v for k, v in options.items() if k != "client_kwargs"}
    return {
        "same": (url, options),
        "s3a": (url.replace("s3://", "s3a://"), options),
        "endpoint-slash": (url, slash),
        "endpoint-upper-scheme": (url, upper),
        "endpoint-top-level": (url, {**top, "endpoint_url": endpoint + "/"}),
        "s3a-obstore": (url.replace("s3://", "s3a://"), {**slash, "backend": "obstore"}),
        "s3a-fsspec": (url.replace("s3://", "s3a://"), {**slash, "backend": "fsspec"}),
        "env-variable": (url.replace("s3://", "s3a://"), top),
    }


def _source(url, options, name="src.zarr"):
    data = np.arange(24, dtype="i4").reshape(6, 4)
    src = cs.create_array(f"{url}/{name}", shape=(6, 4), chunks=(3, 3), dtype="i4",
                          storage_options=options, fill_value=0)
    src[...] = data
    return src, data


def _intact(url, options, data, name="src.zarr"):
    np.testing.assert_array_equal(
        cs.open_array(f"{url}/{name}", mode="r", storage_options=options, cache=0)[...], data)


@pytest.fixture(scope="module", params=S3_BACKENDS)
def refused_source(request, s3_endpoint, _s3_admin):
    """``(url, options, source array, its data)``: a bucket holding ``src.zarr``, written
    through one backend (its options name it), shared by the tests that only try to write
    onto it (each refused before it writes; each checks the source is intact after)."""
    if request.param == "obstore":
        pytest.importorskip("obstore")
    with new_bucket(_s3_admin) as bucket:
        url, options = f"s3://{bucket}", {**s3_storage_options(s3_endpoint),
                                         "backend": request.param}
        yield (url, options, *_source(url, options))


@pytest.mark.parametrize("op", ["copy", "rechunk"])
@pytest.mark.parametrize("spelling", sorted(_spellings("s3://b", {"client_kwargs": {
    "endpoint_url": "http://h"}})))
def test_onto_itself_refused_for_every_spelling(refused_source, monkeypatch, spelling, op):
    """The source on either backend (its options name it; so do the spellings' but the
    ``-obstore`` / ``-fsspec`` ones, which cross to the other backend)."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # the spelling's clients are new ones
    url, options, src, data = refused_source
    other_url, other_options = _spellings(url, options)[spelling]
    if spelling == "s3a-obstore":
        pytest.importorskip("obstore")
    if spelling == "env-variable":
        monkeypatch.setenv(ENDPOINT_VARIABLE, options["client_kwargs"]["endpoint_url"] + "/")
    with pytest.raises(SameLocationError):
        if op == "copy":
            cs.copy(src, other_url + "/src.zarr", overwrite=True, storage_options=other_options)
        else:
            csd.rechunk(src, (2, 2), other_url + "/src.zarr", overwrite=True, max_mem="1MiB",
                        storage_options=other_options).execute()
    with pytest.raises(SameLocationError):  # the group containing it, too
        cs.copy(src, other_url, "", overwrite=True, storage_options=other_options)
    _intact(url, options, data)


@pytest.fixture
def second_bucket(s3_bucket, _s3_admin):
    with new_bucket(_s3_admin) as bucket:
        yield f"s3://{bucket}"


@pytest.mark.parametrize("target", ["other-path", "sibling-prefix", "other-bucket",
                                    "other-bucket-s3a-obstore", "other-bucket-s3a-fsspec"])
def test_other_places_are_not_refused(s3_bucket_both, second_bucket, target):
    url, options = s3_bucket_both
    src, data = _source(url, options)
    where, opts = {
        "other-path": (f"{url}/dst.zarr", options),
        "sibling-prefix": (f"{url}/src.zarr2", options),  # a name that starts the same
        "other-bucket": (f"{second_bucket}/src.zarr", options),
        "other-bucket-s3a-obstore": (second_bucket.replace("s3://", "s3a://") + "/src.zarr",
                                     {**options, "backend": "obstore"}),
        "other-bucket-s3a-fsspec": (second_bucket.replace("s3://", "s3a://") + "/src.zarr",
                                    {**options, "backend": "fsspec"}),
    }[target]
    if "obstore" in target:
        pytest.importorskip("obstore")
    out = cs.copy(src, where, overwrite=True, storage_options=opts)
    np.testing.assert_array_equal(out[...], data)
    _intact(url, options, data)


def test_different_endpoint_is_not_refused(s3_bucket_both):
    """The source's own path on another endpoint is not refused (``localhost`` for the
    server on 127.0.0.1: host names are not resolved, so not the same place), and a copy
    there (to another path: it is the same server after all) is written."""
    url, options = s3_bucket_both
    src, data = _source(url, options)
    other = copy.deepcopy(options)
    other["client_kwargs"]["endpoint_url"] = options["client_kwargs"]["endpoint_url"].replace(
        "127.0.0.1", "localhost")
    refuse_onto_itself(src, resolve_store(url + "/src.zarr", storage_options=other), "",
                       "copy")
    out = cs.copy(src, url + "/elsewhere.zarr", overwrite=True, storage_options=other)
    np.testing.assert_array_equal(out[...], data)
    _intact(url, options, data)


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_cache_invalidated_by_write_through_other_backend_and_spelling(s3_bucket, backend):
    if backend == "obstore":
        pytest.importorskip("obstore")
    url, options = s3_bucket
    a = cs.create_array(url + "/c.zarr", shape=(8,), chunks=(4,), dtype="i4",
                        storage_options={**options, "backend": backend}, cache="1MiB")
    a[...] = 1
    np.testing.assert_array_equal(a[...], np.ones(8, "i4"))
    other = "obstore" if backend == "fsspec" else "fsspec"
    opts = copy.deepcopy(options)
    opts["client_kwargs"]["endpoint_url"] += "/"
    b = cs.open_array(url.replace("s3://", "s3a://") + "/c.zarr", mode="r+",
                      storage_options={**opts, "backend": other}, cache=0)
    assert b.store.location() == a.store.location()
    b[1:3] = 5
    np.testing.assert_array_equal(a[...], [1, 5, 5, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("endpoint", [
    None, "https://s3.amazonaws.com", "https://s3.eu-west-1.amazonaws.com/",
    "https://S3.us-east-1.amazonaws.com:443", "https://s3-eu-west-1.amazonaws.com",
    "https://s3.dualstack.us-east-2.amazonaws.com"])
def test_aws_endpoints_are_one_place(endpoint):
    """Every bucket of AWS's commercial partition is reached through any of its
    endpoints (or none): one location, so a copy onto itself is refused."""
    assert remote_location("s3a", "b/x/", endpoint) == ("s3", "b/x", None)


@pytest.mark.parametrize("endpoint", [
    "https://s3.us-gov-west-1.amazonaws.com", "https://s3.cn-north-1.amazonaws.com.cn",
    "http://s3.amazonaws.com.evil.example", "https://s3.amazonaws.com.evil.example",
    "http://127.0.0.1:9000"])
def test_other_partitions_and_lookalikes_stay_apart(endpoint):
    assert remote_location("s3", "b/x", endpoint)[2] is not None


def test_resolve_location_takes_what_the_entry_points_take(tmp_path):
    """``api.locations.resolve_location``: the Store and normalised path a
    ``store=``/``path=`` pair names (a Group with the member path below it, a directory,
    a Store), as the Dask layer's entry points resolve them without the storage layer."""
    from chunkstore.api.locations import resolve_location
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w").create_group("sub")
    store, path = resolve_location(g, "/x/y/")
    assert store is g.store and path == "sub/x/y"
    assert resolve_location(g)[1] == "sub"
    store, path = resolve_location(str(tmp_path / "d.zarr"), "a/")
    assert isinstance(store, cs.LocalStore) and path == "a"
    memory = cs.MemoryStore()
    assert resolve_location(memory) == (memory, "")
