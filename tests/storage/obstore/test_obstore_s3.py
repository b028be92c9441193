"""ObstoreStore (the optional obstore backend of s3:// URLs) against a real moto S3 server
on 127.0.0.1 (nothing mocked).

The store contract suite (``chunkstore.testing.store_contract``) runs here on
ObstoreStore, then what is specific to the backend: selecting it, round trips through arrays in both directions
with the fsspec backend, conditional-write conflicts and deletes, listings, missing keys,
errors naming the key, pickling, and writer processes racing on one object.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import uuid

import numpy as np
import pytest

pytest.importorskip("obstore")
# (no module-level import of moto.server: the s3_bucket fixture skips without it, and the
# racing processes, which import this module, start ~0.5 s of CPU sooner each)

import chunkstore as cs  # noqa: E402
from chunkstore.errors import ReadOnlyError  # noqa: E402
from chunkstore.io.rmw import update_object  # noqa: E402
from chunkstore.storage import FsspecStore, InvalidStoreError, StoreError  # noqa: E402
from chunkstore.storage.base import ABSENT, ANY  # noqa: E402
from chunkstore.storage.bounds import ObjectSizeError  # noqa: E402
from chunkstore.storage.local.temp import temp_name  # noqa: E402
from chunkstore.storage.obstore.store import ObstoreStore  # noqa: E402
from chunkstore.storage.resolve import resolve_store  # noqa: E402
from chunkstore.storage.s3_backend import BACKEND_VARIABLE  # noqa: E402
from chunkstore.storage.s3_conditional import ETag  # noqa: E402
from chunkstore.testing.store_contract import StoreContract  # noqa: E402
from tests.multiproc import context


class TestObstoreContract(StoreContract):
    """The store contract suite on ObstoreStore (signed requests: full compare-and-swap)."""

    conditional_writes = conditional_delete = True

    def location(self, request: pytest.FixtureRequest) -> tuple[str, dict]:
        url, options = request.getfixturevalue("s3_bucket")
        return url + "/root.zarr", options

    def make_store(self, location: tuple[str, dict]) -> ObstoreStore:
        return ObstoreStore(location[0], location[1])


@pytest.fixture
def obs(s3_bucket):
    url, options = s3_bucket
    return ObstoreStore(url + "/o.zarr", options), url, options


# -- selecting the backend -----------------------------------------------------------------
def test_obstore_is_the_default_of_s3_urls(s3_bucket, monkeypatch):
    url, options = s3_bucket
    monkeypatch.delenv(BACKEND_VARIABLE, raising=False)
    default = resolve_store(url + "/x", storage_options=options)
    assert type(default) is ObstoreStore and default.backend == "obstore"
    assert type(resolve_store(url.replace("s3://", "s3a://") + "/x",
                              storage_options=options)) is ObstoreStore
    st = resolve_store(url + "/x", storage_options={**options, "backend": "obstore"})
    assert type(st) is ObstoreStore and "backend" not in st.storage_options
    ro = resolve_store(url + "/x", mode="r", storage_options={**options, "backend": "obstore"})
    assert type(ro) is ObstoreStore and ro.read_only
    explicit = resolve_store(url + "/x", storage_options={**options, "backend": "fsspec"})
    assert isinstance(explicit, FsspecStore) and explicit.backend == "fsspec"
    assert "backend='fsspec'" in explicit.backend_reason
    assert repr(explicit) == f"FsspecStore('{url}/x')"  # asked for: nothing to explain
    assert "backend" not in explicit.storage_options
    monkeypatch.setenv(BACKEND_VARIABLE, "fsspec")
    from_env = resolve_store(url + "/x", storage_options=options)
    assert isinstance(from_env, FsspecStore) and BACKEND_VARIABLE in from_env.backend_reason
    monkeypatch.setenv(BACKEND_VARIABLE, "obstore")
    assert type(resolve_store(url + "/x", storage_options=options)) is ObstoreStore
    # fsspec stays the backend of every other scheme, whatever the environment says
    assert type(resolve_store("memory://obstore-env")) is FsspecStore
    with pytest.raises(InvalidStoreError, match="s3:// URLs only"):
        resolve_store("memory://x", storage_options={"backend": "obstore"})
    with pytest.raises(InvalidStoreError, match="unknown storage backend 'nope'"):
        resolve_store(url + "/x", storage_options={**options, "backend": "nope"})


def test_options_obstore_cannot_take_fall_back_to_fsspec_visibly(s3_bucket, monkeypatch):
    url, options = s3_bucket
    monkeypatch.delenv(BACKEND_VARIABLE, raising=False)
    extra = {"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}}
    st = resolve_store(url + "/x", storage_options={**options, **extra})
    assert type(st) is not ObstoreStore and st.backend == "fsspec"
    assert "s3_additional_kwargs" in st.backend_reason and "s3_additional_kwargs" in repr(st)
    st.set("k", b"v")  # and it works, through s3fs
    assert resolve_store(url + "/x", storage_options=options).get("k") == b"v"
    # the reason survives pickling and read-only views
    back = pickle.loads(pickle.dumps(st.with_read_only()))
    assert back.read_only and back.backend_reason == st.backend_reason and back == st
    # options that only configure s3fs's caches, or say what obstore does anyway, do not
    harmless = {"use_listings_cache": False, "skip_instance_cache": True, "version_aware": False,
                "config_kwargs": {"max_pool_connections": 50, "connect_timeout": 5,
                                  "s3": {"addressing_style": "path"},
                                  "request_checksum_calculation": "when_required"}}
    assert type(resolve_store(url + "/x", storage_options={**options, **harmless})) \
        is ObstoreStore
    # asked for explicitly, obstore names what it cannot take
    with pytest.raises(TypeError, match="s3_additional_kwargs"):
        resolve_store(url + "/x", storage_options={**options, **extra, "backend": "obstore"})


def test_credentials_only_in_aws_files_fall_back_to_fsspec(s3_bucket, monkeypatch, tmp_path):
    """obstore does not read ~/.aws/credentials or profiles: with no credentials in the
    options or the environment, botocore (s3fs) is the client that finds them."""
    url, options = s3_bucket
    monkeypatch.delenv(BACKEND_VARIABLE, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = testing\n"
                           "aws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    bare = {"client_kwargs": dict(options["client_kwargs"])}
    st = resolve_store(url + "/x", storage_options=bare)
    assert st.backend == "fsspec" and "credentials file" in st.backend_reason
    st.set("k", b"v")
    assert st.get("k") == b"v"
    assert type(resolve_store(url + "/x", storage_options=options)) is ObstoreStore
    monkeypatch.setenv("AWS_PROFILE", "other")
    assert "AWS_PROFILE" in resolve_store(url + "/x", storage_options=bare).backend_reason
    assert type(resolve_store(url + "/x", storage_options=options)) is ObstoreStore
    assert resolve_store(url + "/x", storage_options={**bare, "profile": "p"}).backend == "fsspec"


def test_unknown_option_is_named(s3_bucket):
    url, options = s3_bucket
    with pytest.raises(TypeError, match="session"):
        ObstoreStore(url, {**options, "session": object()})


# -- round trips ----------------------------------------------------------------------------
def test_array_round_trip_both_ways_with_fsspec(s3_bucket):
    url, options = s3_bucket
    data = np.arange(120 * 70, dtype="f8").reshape(120, 70)
    ob = {**options, "backend": "obstore"}
    fs = {**options, "backend": "fsspec"}  # the default is obstore now
    a = cs.create_array(url + "/a.zarr", shape=data.shape, chunks=(50, 30), dtype="f8",
                        storage_options=ob)
    assert type(a.store) is ObstoreStore
    a[...] = data
    np.testing.assert_array_equal(cs.open_array(url + "/a.zarr", mode="r",
                                                storage_options=fs)[...], data)
    b = cs.create_array(url + "/b.zarr", shape=data.shape, chunks=(50, 30), dtype="f8",
                        storage_options=fs)
    assert isinstance(b.store, FsspecStore)
    b[...] = data
    back = cs.open_array(url + "/b.zarr", mode="r", storage_options=ob)
    np.testing.assert_array_equal(back[...], data)
    np.testing.assert_array_equal(back[3:77, 5:61], data[3:77, 5:61])
    # partial writes (read-modify-write with ETags) and a chunk made all fill
    a[10:20, 10:20] = -1
    a[0:50, 0:30] = 0
    expected = data.copy()
    expected[10:20, 10:20] = -1
    expected[0:50, 0:30] = 0
    np.testing.assert_array_equal(a[...], expected)
    assert not a.store.exists("c/0/0")  # deleted conditionally, as fsspec does


def test_group_and_consolidated_metadata(s3_bucket):
    url, options = s3_bucket
    ob = {**options, "backend": "obstore"}
    g = cs.group(url + "/g.zarr", storage_options=ob)
    for i in range(3):
        g.create_array(f"a{i}", shape=(10,), chunks=(5,), dtype="i4")[:] = i
    cs.consolidate_metadata(url + "/g.zarr", storage_options=ob)
    back = cs.open_group(url + "/g.zarr", mode="r", storage_options=ob, use_consolidated=True)
    assert sorted(name for name, _ in back.members()) == ["a0", "a1", "a2"]
    assert back["a2"][3] == 2


# -- conditional writes ----------------------------------------------------------------------
def test_conditional_put_conflicts(obs):
    st, _, _ = obs
    assert st.capabilities.conditional_writes and st.capabilities.conditional_delete
    assert st.get_versioned("k") == (None, ABSENT)
    assert st.commit_many([("k", b"1", ABSENT)]) == [True]
    assert st.commit_many([("k", b"2", ABSENT)]) == [False]  # If-None-Match: * refused
    value, generation = st.get_versioned("k")
    assert value == b"1" and isinstance(generation, ETag)
    # two commits on one generation, sent concurrently: exactly one applies
    done = st.commit_many([("k", b"3", generation), ("k", b"4", generation)])
    assert sorted(done) == [False, True]
    assert st.get("k") == (b"3" if done[0] else b"4")
    stale = generation
    fresh = st.get_versioned("k")[1]
    assert st.set_if("k", None, stale) is False  # If-Match DELETE of a changed object
    assert st.get("k") in (b"3", b"4")
    assert st.set_if("k", None, fresh) is True
    assert st.get("k") is None
    assert st.set_if("k", b"5", fresh) is False  # If-Match on a deleted object: 404
    assert st.set_if("k", None, ABSENT) is True
    assert st.commit_many([("k", b"6", ANY), ("gone", None, ANY)]) == [True, True]


def test_generations_are_the_same_etags_as_fsspec(obs):
    st, url, options = obs
    fs_store = FsspecStore(url + "/o.zarr", options)
    st.set("k", b"v")
    ours, theirs = st.get_versioned("k")[1], fs_store.get_versioned("k")[1]
    assert ours.value.strip('"') == theirs.value.strip('"')
    # a generation read by one backend is honoured by the other
    assert fs_store.set_if("k", b"w", ours) is True
    assert st.set_if("k", b"x", theirs) is False


def _bump(url: str, options: dict, rounds: int) -> None:
    st = ObstoreStore(url, options)
    for _ in range(rounds):
        update_object(st, "counter", lambda old: str(int(old or b"0") + 1).encode())


def test_processes_racing_on_one_object_lose_nothing(s3_bucket):
    url, options = s3_bucket
    where = url + "/race.zarr"
    ctx = context()
    procs = [ctx.Process(target=_bump, args=(where, options, 10)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0
    assert ObstoreStore(where, options).get("counter") == b"30"


# -- listing, missing keys, errors ----------------------------------------------------------
def test_listing(obs):
    st, _, _ = obs
    st.set_many({"a/b/c": b"1", "a/d": b"2", "ab": b"3", "z": b"4",
                 f"a/{temp_name()}": b"temp"})
    assert list(st.list_prefix("")) == ["a/b/c", "a/d", "ab", "z"]
    assert list(st.list_prefix("a")) == ["a/b/c", "a/d", "ab"]
    assert list(st.list_prefix("a/")) == ["a/b/c", "a/d"]
    assert list(st.list_dir("")) == ["a", "ab", "z"]
    assert list(st.list_dir("a")) == ["b", "d"]
    assert list(st.list_dir("nothing")) == []
    st.delete_prefix("a")
    assert list(st.list()) == ["ab", "z"]


def test_missing_keys_read_as_none(obs):
    st, _, _ = obs
    assert st.get("nope") is None
    assert st.get("nope", (0, 4)) is None
    assert st.get_many(["nope", "nada"]) == [None, None]
    assert st.get_ranges([("nope", (0, 1)), ("nope", (-2, None))]) == [None, None]
    assert st.get_versioned_many(["nope"]) == [(None, ABSENT)]
    assert not st.exists("nope") and st.getsize("nope") is None
    st.delete("nope")
    st.delete_many(["nope", "nada"])


def test_views_are_obstores_buffers_bounded_and_none_when_missing(obs):
    st, _, _ = obs
    st.set_many({"a": b"hello", "b": b"x" * 100, "e": b""})
    views = st.get_views(["a", "nope", "b", "e"])
    assert [None if v is None else bytes(v) for v in views] == [b"hello", None, b"x" * 100,
                                                                b""]
    # obstore's own buffers, handed out read-only (no copy into bytes)
    assert all(type(v) is memoryview and v.readonly for v in views if v is not None)
    assert bytes(st.get_views(["a"])[0]) == b"hello"  # one key: in the calling thread
    assert st.get_views([]) == []
    with pytest.raises(ObjectSizeError):
        st.get_views(["a", "b"], max_bytes=10)
    assert [bytes(v) for v in st.get_views(["a", "e"], max_bytes=10)] == [b"hello", b""]
    st.set("a", b"new")
    assert bytes(views[0]) == b"hello"  # a view shows the value it was looked up with


def test_bounded_reads_are_one_plain_get_and_refuse_unread(obs, monkeypatch):
    """A bounded read is one GET of the whole object (no range for the server to cut out,
    no HEAD, also for an empty object) whose size is checked before its body is read: an
    oversized object's body is never read."""
    import obstore

    st, _, _ = obs
    st.set_many({"big": bytes(10_000), "small": b"abc", "empty": b""})
    sent, read, real = [], [], obstore.get

    class Spy:
        def __init__(self, result, name):
            self.result, self.name, self.meta = result, name, result.meta

        def bytes(self):
            read.append(self.name)
            return self.result.bytes()

    def get(store, path, **kwargs):
        name = path.rsplit("/", 1)[-1]
        sent.append((name, kwargs))
        return Spy(real(store, path, **kwargs), name)

    def head(*args, **kwargs):
        raise AssertionError("a bounded read needs no HEAD")

    monkeypatch.setattr(obstore, "get", get)
    monkeypatch.setattr(obstore, "head", head)
    for read_big in (lambda: st.get_views(["big"], max_bytes=100),
                     lambda: st.get_many(["small", "big"], max_bytes=100),
                     lambda: st.get("big", max_bytes=100)):
        with pytest.raises(ObjectSizeError, match="'big' .* holds 10000 bytes"):
            read_big()
    assert "big" not in read
    del sent[:], read[:]
    assert [bytes(v) for v in st.get_views(["small", "empty"], max_bytes=100)] == [b"abc",
                                                                                  b""]
    assert st.get("empty", max_bytes=0) == b""
    assert sorted(read) == ["empty", "empty", "small"]
    assert sorted(sent, key=str) == [("empty", {}), ("empty", {}), ("small", {})]


def test_array_reads_decode_obstores_buffers(s3_bucket, monkeypatch):
    """Whole chunks are read as views (no copy of each body into bytes): get_many is not
    called for them, and the values are right."""
    url, options = s3_bucket
    data = np.arange(64 * 48, dtype="f4").reshape(64, 48)
    a = cs.create_array(url + "/views.zarr", shape=data.shape, dtype=data.dtype,
                        chunks=(16, 16), storage_options={**options, "backend": "obstore"})
    a[...] = data
    r = cs.open_array(url + "/views.zarr", mode="r",
                      storage_options={**options, "backend": "obstore"})
    assert type(r.store) is ObstoreStore

    def refuse(*args, **kwargs):
        raise AssertionError("get_many copies every body: chunks are read as views")

    monkeypatch.setattr(ObstoreStore, "get_many", refuse)
    np.testing.assert_array_equal(r[...], data)
    np.testing.assert_array_equal(r[3:40, 5:33], data[3:40, 5:33])
    assert r[1, 1] == data[1, 1]


def test_errors_name_the_key_and_endpoint(s3_bucket):
    url, options = s3_bucket
    dead = {**options, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
            "retry_config": {"max_retries": 0}}
    st = ObstoreStore(url + "/e.zarr", dead)
    for call in (lambda: st.get("c/0"), lambda: st.get_many(["c/0", "c/1"]),
                 lambda: st.set("c/0", b"x"), lambda: st.get_versioned_many(["c/0"]),
                 lambda: st.commit_many([("c/0", b"x", ABSENT)]),
                 lambda: list(st.list_prefix(""))):
        with pytest.raises(StoreError) as info:
            call()
        message = str(info.value)
        assert "127.0.0.1:9" in message and ("'c/0'" in message or "''" in message)
    with pytest.raises(StoreError, match=r"'zarr.json' of s3://.*/e.zarr/x \(endpoint"):
        cs.open_array(url + "/e.zarr/x", mode="r",
                      storage_options={**dead, "backend": "obstore"})
    missing_bucket = ObstoreStore(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/p", options)
    with pytest.raises(StoreError, match="'k'"):
        missing_bucket.set("k", b"v")


def test_read_only_and_pickling(obs):
    st, _, _ = obs
    st.set("k", b"v")
    ro = st.with_read_only()
    with pytest.raises(ReadOnlyError, match="'k'"):
        ro.set("k", b"w")
    with pytest.raises(ReadOnlyError):
        ro.commit_many([("k", b"w", ANY)])
    back = pickle.loads(pickle.dumps(st))
    assert type(back) is ObstoreStore and back == st and back.get("k") == b"v"
    assert back.location() == FsspecStore(st.url, st.storage_options).location()


def _in_forked_child(st: ObstoreStore, queue) -> None:
    try:
        st.get("k")
    except StoreError as e:
        queue.put(f"StoreError: {e}")
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(e).__name__}: {e}")
    else:
        queue.put("no error")


def test_forked_child_is_refused_not_hung(obs):
    """obstore's runtime does not survive fork(): a child forked after the parent used
    the backend gets an error that says so and what to do, instead of waiting forever."""
    st, _, _ = obs
    st.set("k", b"v")
    assert st.get("k") == b"v"
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_in_forked_child, args=(st, queue))
    child.start()
    try:
        message = queue.get(timeout=60)
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert message.startswith("StoreError") and "fork" in message and "'spawn'" in message
