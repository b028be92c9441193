"""S3 specifics against a real moto server on 127.0.0.1 (nothing mocked): the
conditional requests the server honours, the endpoint taken from the environment, and
one-line errors for an unreachable endpoint or a missing fsspec backend. (The store
conformance suite and the multi-process races are in tests/storage/test_conditional.py.)
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import FsspecStore, MissingBackendError, StoreError
from chunkstore.storage.base import ABSENT
from chunkstore.storage.fsspec.setup import ENDPOINT_VARIABLE
from chunkstore.storage.s3_conditional import ETag, is_conflict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(cs.__file__)))


def _client_error(call):
    try:
        call()
    except Exception as e:  # s3fs's translation, the botocore error as its cause
        return e
    return None


def test_server_honours_conditional_put_and_delete(s3_bucket):
    """What the flags rest on: If-None-Match: * and If-Match on PutObject, If-Match on
    DeleteObject, answered 412 when the condition fails."""
    url, options = s3_bucket
    st = FsspecStore(url + "/raw", options)
    fs, bucket = st.fs, url[len("s3://"):]
    put = fs.call_s3("put_object", Bucket=bucket, Key="raw/k", Body=b"1", IfNoneMatch="*")
    etag = put["ETag"]
    assert is_conflict(_client_error(lambda: fs.call_s3(
        "put_object", Bucket=bucket, Key="raw/k", Body=b"2", IfNoneMatch="*")))
    assert is_conflict(_client_error(lambda: fs.call_s3(
        "put_object", Bucket=bucket, Key="raw/k", Body=b"2", IfMatch='"0000"')))
    fs.call_s3("put_object", Bucket=bucket, Key="raw/k", Body=b"2", IfMatch=etag)
    assert is_conflict(_client_error(lambda: fs.call_s3(
        "delete_object", Bucket=bucket, Key="raw/k", IfMatch=etag)))  # stale now
    assert st.get("k") == b"2"
    assert st.capabilities.conditional_writes and st.capabilities.conditional_delete


def test_generations_are_etags(s3_bucket):
    url, options = s3_bucket
    st = FsspecStore(url + "/g", options)
    assert st.get_versioned("k") == (None, ABSENT)
    st.set("k", b"v")
    value, generation = st.get_versioned("k")
    assert value == b"v" and isinstance(generation, ETag)
    assert generation.value.strip('"') == st.fs.info(st.root + "/k")["ETag"].strip('"')


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_endpoint_from_environment(s3_bucket, monkeypatch, tmp_path, backend):
    """Through either S3 backend (CHUNKSTORE_S3_BACKEND, which the CLI's process sees
    too; unset, obstore is the default when installed)."""
    if backend == "obstore":
        pytest.importorskip("obstore")
    monkeypatch.setenv("CHUNKSTORE_S3_BACKEND", backend)
    url, options = s3_bucket
    endpoint = options["client_kwargs"]["endpoint_url"]
    cs.create_array(url + "/env.zarr", shape=(3,), chunks=(2,), dtype="i2",
                    storage_options=options)[:] = [1, 2, 3]
    bare = {"key": "testing", "secret": "testing"}
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv(ENDPOINT_VARIABLE, endpoint)
    st = FsspecStore(url + "/env.zarr", bare)
    assert st.endpoint == endpoint and st.location()[2] == endpoint
    a = cs.open_array(url + "/env.zarr", mode="r", storage_options=bare)
    assert a.store.backend == backend and a.store.endpoint == endpoint
    np.testing.assert_array_equal(a[:], [1, 2, 3])
    out = subprocess.run([sys.executable, "-m", "chunkstore", "info", url + "/env.zarr"],
                         capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr
    assert "(3,)" in out.stdout
    monkeypatch.delenv(ENDPOINT_VARIABLE)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # botocore's own variable
    np.testing.assert_array_equal(
        cs.open_array(url + "/env.zarr", mode="r", storage_options=bare)[:], [1, 2, 3])
    explicit = FsspecStore(url + "/env.zarr", {**bare, "endpoint_url": "http://elsewhere"})
    assert explicit.endpoint == "http://elsewhere"  # options win over the environment


def test_unreachable_endpoint_is_a_store_error_naming_key_and_endpoint(s3_bucket):
    from tests.conftest import free_port

    url, _ = s3_bucket
    dead = f"http://127.0.0.1:{free_port()}"
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": dead},
               "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}}
    st = FsspecStore(url + "/gone.zarr", options)
    for call in (lambda: st.get("c/0", (0, 4)), lambda: st.get_many(["c/0"]),
                 lambda: st.get_ranges([("c/0", (2, 8))]), lambda: st.exists("c/0"),
                 lambda: st.get_versioned("c/0")):
        with pytest.raises(StoreError, match="c/0") as info:
            call()
        assert dead in str(info.value) and "\n" not in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs installed")
def test_missing_backend_names_the_package():
    with pytest.raises(MissingBackendError, match="pip install gcsfs"):
        FsspecStore("gs://bucket/x.zarr")
    with pytest.raises(MissingBackendError, match="gcsfs"):
        cs.open("gs://bucket/x.zarr", mode="r")


def test_server_conditions_probe_once_and_build_capabilities_once():
    """``ServerConditions`` (one per S3 store, both backends): the location is asked once,
    the probe runs once per process and server, a read-only store never probes, and the
    capabilities are built again only when what is known changed."""
    from chunkstore.runtime import reset
    from chunkstore.storage.capabilities import Capabilities
    from chunkstore.storage.s3_conditional import Conditions, ServerConditions

    base = Capabilities(partial_reads=True, conditional_writes=False,
                        conditional_delete=False, conditional_writes_ignored=False)
    asked, probed = [], []

    def location():
        asked.append(1)
        return ("s3", "bucket/prefix", "http://example.invalid")

    def probe():
        probed.append(1)
        return Conditions(writes=True, deletes=False)

    reset()  # no probe result of this server known in the process
    try:
        server = ServerConditions(base, conditional_delete=True)
        assumed = server.capabilities(location, True, probe, "here")
        assert not probed and assumed.conditional_writes and assumed.conditional_delete
        first = server.capabilities(location, False, probe, "here")
        assert first.conditional_writes and not first.conditional_delete
        assert not first.conditional_writes_ignored and first.partial_reads
        assert server.capabilities(location, False, probe, "here") is first
        assert server.versioned_reads(location)
        assert len(probed) == 1 and len(asked) == 1
        assert ServerConditions(base, False).capabilities(location, False, probe, "x") \
            .conditional_writes and len(probed) == 1  # the same server: probed already
    finally:
        reset()
