"""The contract every Store keeps, as a pytest class to subclass once per store.

A store's test module subclasses :class:`StoreContract` and implements two hooks:
:meth:`~StoreContract.location` (where the stores of one test live: a directory, a URL,
a dict, taken from pytest fixtures) and :meth:`~StoreContract.make_store` (a new store
object on that location; called more than once per test, every call sees the same data).
It also says whether the store checks generations (``conditional_writes``) and
conditional deletes (``conditional_delete``). pytest then runs every test method below
on it::

    class TestMyStore(StoreContract):
        conditional_writes = conditional_delete = True

        def location(self, request):
            return request.getfixturevalue("tmp_path")

        def make_store(self, location):
            return MyStore(location / "root")
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from chunkstore.errors import InvalidKeyError, ReadOnlyError
from chunkstore.runtime.writes import WRITE_LISTENERS
from chunkstore.storage.base import ABSENT, ANY, CHANGED, Store

#: keys every store refuses (and names in its error)
BAD_KEYS = ["", "/abs/key", "a/../b", "..", "../escape", "a\\b", "a//b", "./a", "a/", "C:/x",
            "nul\x00byte"]


def fill(store: Store) -> dict[str, bytes]:
    """Store a small hierarchy of keys in ``store``; returns them."""
    items = {"zarr.json": b"{}", "a/zarr.json": b'{"x": 1}', "a/c/0/0": bytes(range(10)),
             "a/c/0/1": b"second", "a/cc": b"sibling", "b/deep/er/key": b"deep"}
    store.set_many(items)
    return items


class StoreContract:
    """The store contract suite (see the module docstring)."""

    #: the store's ``commit_many`` checks generations (compare-and-swap)
    conditional_writes: bool = False
    #: ... and a conditional commit may delete
    conditional_delete: bool = False

    # -- hooks ----------------------------------------------------------------------------
    def location(self, request: pytest.FixtureRequest) -> Any:
        """Where the stores of one test live (default: the test's ``tmp_path``)."""
        return request.getfixturevalue("tmp_path")

    def make_store(self, location: Any) -> Store:
        """A new, writable store object on ``location`` (empty on the first call)."""
        raise NotImplementedError

    # -- fixtures -------------------------------------------------------------------------
    @pytest.fixture
    def stores(self, request: pytest.FixtureRequest) -> Iterator[Callable[[], Store]]:
        """A factory of store objects on one location, closed after the test."""
        where = self.location(request)
        made: list[Store] = []

        def factory() -> Store:
            made.append(self.make_store(where))
            return made[-1]

        yield factory
        for st in made:
            st.close()

    @pytest.fixture
    def store(self, stores: Callable[[], Store]) -> Store:
        """A fresh, empty store."""
        return stores()

    # -- keys and values ------------------------------------------------------------------
    def test_set_get_exists_getsize_delete(self, store: Store) -> None:
        assert store.get("k/v") is None
        assert not store.exists("k/v")
        assert store.getsize("k/v") is None
        store.set("k/v", b"hello")
        assert store.get("k/v") == b"hello"
        assert store.exists("k/v") and store.getsize("k/v") == 5
        assert not store.exists("k")  # a "directory" is not a key
        store.set("k/v", b"replaced, longer")
        assert store.get("k/v") == b"replaced, longer"
        store.delete("k/v")
        assert store.get("k/v") is None and not store.exists("k/v")
        store.delete("k/v")  # missing: not an error

    def test_values_accept_buffers(self, store: Store) -> None:
        arr = np.arange(6, dtype="<u2")
        store.set("np", arr)
        store.set("mv", memoryview(b"abc"))
        store.set("ba", bytearray(b"xyz"))
        assert store.get("np") == arr.tobytes()
        assert store.get("mv") == b"abc" and store.get("ba") == b"xyz"
        assert isinstance(store.get("np"), bytes)

    def test_empty_value(self, store: Store) -> None:
        store.set("empty", b"")
        assert store.get("empty") == b"" and store.exists("empty")
        assert store.get("empty", (0, None)) == b"" and store.get("empty", (-4, None)) == b""
        assert store.get_ranges([("empty", (0, 10))]) == [b""]
        assert store.getsize("empty") == 0

    def test_listing(self, store: Store) -> None:
        items = fill(store)
        assert sorted(store.list()) == sorted(items)
        assert sorted(store.list_prefix("a/")) == ["a/c/0/0", "a/c/0/1", "a/cc", "a/zarr.json"]
        assert sorted(store.list_prefix("a/c")) == ["a/c/0/0", "a/c/0/1", "a/cc"]
        assert sorted(store.list_prefix("a/c/")) == ["a/c/0/0", "a/c/0/1"]
        assert list(store.list_prefix("nope/")) == []
        assert sorted(store.list_dir("")) == ["a", "b", "zarr.json"]
        assert sorted(store.list_dir("a")) == ["c", "cc", "zarr.json"]
        assert sorted(store.list_dir("a/")) == ["c", "cc", "zarr.json"]
        assert sorted(store.list_dir("b/deep")) == ["er"]
        assert list(store.list_dir("missing")) == []

    def test_byte_ranges(self, store: Store) -> None:
        value = bytes(range(10))
        store.set("r", value)
        assert store.get("r", (0, 3)) == value[:3]
        assert store.get("r", (2, None)) == value[2:]
        assert store.get("r", (4, 7)) == value[4:7]
        assert store.get("r", (-3, None)) == value[-3:]  # suffix range
        assert store.get("r", (-100, None)) == value  # suffix longer than value
        assert store.get("r", (5, 5)) == b""
        assert store.get("r", (8, 100)) == value[8:]  # stop past the end
        assert store.get("r", (20, None)) == b""  # start past the end
        assert store.get("missing", (0, 3)) is None

    def test_get_ranges_batch(self, store: Store) -> None:
        store.set_many({"x": b"0123456789", "y": b"abcdef"})
        out = store.get_ranges([("x", (1, 3)), ("missing", (0, 2)), ("y", None),
                                ("x", (-2, None)), ("y", (2, 4))])
        assert out == [b"12", None, b"abcdef", b"89", b"cd"]

    def test_versioned_ranges_pin_one_version(self, stores: Callable[[], Store]) -> None:
        """``get_versioned_ranges``: the ranges ``get_ranges`` reads, each with a
        generation; a store that gives one (not ``ANY``) reads a range pinned to it from
        that version only: ``(None, CHANGED)`` once the value was replaced or deleted."""
        store = stores()
        store.set_many({"x": b"0123456789", "y": b"abcdef"})
        requests = [("x", (1, 3)), ("missing", (0, 2)), ("y", None), ("x", (-2, None)),
                    ("y", (2, 4)), ("x", (20, None)), ("x", (5, 5))]
        found = store.get_versioned_ranges([(k, r, ANY) for k, r in requests])
        assert [v for v, _ in found] == [b"12", None, b"abcdef", b"89", b"cd", b"", b""]
        assert found[1][1] is ABSENT
        gen = found[0][1]
        if gen is ANY:  # no versions: a pin cannot be checked, so it is refused
            with pytest.raises(ValueError, match="'x'"):
                store.get_versioned_ranges([("x", (0, 1), object())])
            return
        assert store.get_versioned_ranges([("x", (4, 6), gen), ("x", None, gen)]) == [
            (b"45", gen), (b"0123456789", gen)]
        other = stores()
        other.set("x", b"ABCDEFGHIJ")  # another writer, same size
        assert store.get_versioned_ranges([("x", (4, 6), gen), ("x", (20, None), gen),
                                           ("y", (0, 1), ANY)])[:2] == [(None, CHANGED)] * 2
        new = store.get_versioned_ranges([("x", (4, 6), ANY)])[0]
        assert new[0] == b"EF" and new[1] != gen
        other.delete("x")
        assert store.get_versioned_ranges([("x", (0, 1), new[1])]) == [(None, CHANGED)]

    def test_get_many_with_missing_keys(self, store: Store) -> None:
        items = fill(store)
        keys = ["a/c/0/1", "nope", "zarr.json", "a/c/9/9", "a/c/0/1"]
        assert store.get_many(keys) == [items["a/c/0/1"], None, b"{}", None, items["a/c/0/1"]]
        assert store.get_many([]) == []
        assert store.get_many(["only/missing"]) == [None]

    def test_keys_with_glob_characters_are_literal(self, store: Store) -> None:
        store.set_many({"g/x[1]": b"bracket", "g/x1": b"plain", "g/star*?": b"star"})
        assert store.get_many(["g/x[1]", "g/star*?", "g/x*"]) == [b"bracket", b"star", None]
        assert sorted(store.list_dir("g")) == ["star*?", "x1", "x[1]"]

    def test_set_many_mapping_and_pairs(self, store: Store) -> None:
        store.set_many({"m/1": b"one", "m/2": b"two"})
        store.set_many([("p/1", b"uno"), ("m/1", b"ONE")])
        assert store.get_many(["m/1", "m/2", "p/1"]) == [b"ONE", b"two", b"uno"]

    def test_delete_many_and_prefix(self, store: Store) -> None:
        fill(store)
        store.set("ab/x", b"not under a/")
        store.delete_many(["zarr.json", "not-there"])
        assert store.get("zarr.json") is None
        store.delete_prefix("a")
        assert sorted(store.list()) == ["ab/x", "b/deep/er/key"]
        assert list(store.list_dir("a")) == []
        store.delete_prefix("")
        assert list(store.list()) == []

    def test_read_only_refuses_writes(self, store: Store) -> None:
        fill(store)
        ro = store.with_read_only()
        assert ro.read_only and not store.read_only
        assert ro.get("a/cc") == b"sibling"
        for call in (lambda: ro.set("a/cc", b"x"), lambda: ro.delete("a/cc"),
                     lambda: ro.set_many({"n": b"1"}), lambda: ro.delete_prefix("a"),
                     lambda: ro.delete_many(["a/cc"])):
            with pytest.raises(ReadOnlyError):
                call()
        assert store.get("a/cc") == b"sibling" and store.get("n") is None

    @pytest.mark.parametrize("bad", BAD_KEYS)
    def test_invalid_keys_are_refused_and_named(self, store: Store, bad: str) -> None:
        with pytest.raises(InvalidKeyError) as info:
            store.set(bad, b"x")
        if bad:
            assert repr(bad) in str(info.value)
        with pytest.raises(InvalidKeyError):
            store.get(bad)
        assert list(store.list()) == []

    def test_pickle_round_trip(self, store: Store) -> None:
        items = fill(store)
        store.close()  # a ZipStore commits its session here; others just drop resources
        clone = pickle.loads(pickle.dumps(store))
        assert type(clone) is type(store) and clone.read_only == store.read_only
        assert clone.get_many(sorted(items)) == [items[k] for k in sorted(items)]
        ro = pickle.loads(pickle.dumps(store.with_read_only()))
        assert ro.read_only and ro.get("a/cc") == b"sibling"

    def test_reopen_sees_data(self, stores: Callable[[], Store]) -> None:
        first = stores()
        items = fill(first)
        first.close()
        second = stores()
        assert sorted(second.list()) == sorted(items)

    # -- what caches above learn of writes -------------------------------------------------
    def test_writes_are_reported_unless_tokens_tell(self, store: Store) -> None:
        """A store with cache tokens shows a write in the tokens of its keys; any other
        reports every write (``Store._notify_written``) with the keys or prefix touched."""
        writes: list[tuple[Callable[[], Any], set[str]]] = [
            (lambda: store.set("w/1", b"1"), {"w/1"}),
            (lambda: store.set_many({"w/2": b"2", "w/3": b"3"}), {"w/2", "w/3"}),
            (lambda: store.commit_many([("w/4", b"4", ANY)]), {"w/4"}),
            (lambda: store.delete("w/1"), {"w/1"}),
            (lambda: store.delete_many(["w/2"]), {"w/2"}),
            (lambda: store.delete_prefix("w"), {"w/3", "w/4"}),
        ]
        tokens = store.capabilities.cache_tokens
        heard: list[tuple[Any, Any]] = []

        def listener(st: Any, keys: Any, prefix: Any) -> None:
            if st is store:
                heard.append((keys, prefix))

        WRITE_LISTENERS.add(listener)
        try:
            for write, keys in writes:
                before = store.cache_tokens(sorted(keys)) if tokens else None
                heard.clear()
                write()
                if tokens:
                    after = store.cache_tokens(sorted(keys))
                    assert all(b != a for b, a in zip(before, after, strict=True)), keys
                    continue
                reported = {k for k in keys for said, prefix in heard
                            if k in (said or ()) or (prefix is not None and (
                                not prefix or k.startswith(prefix.rstrip("/") + "/")))}
                assert reported == keys, (keys, heard)
        finally:
            WRITE_LISTENERS.remove(listener)

    # -- versioned reads and conditional commits -------------------------------------------
    def test_capabilities_say_what_commits_check(self, store: Store) -> None:
        assert store.capabilities.conditional_writes is self.conditional_writes
        assert store.capabilities.conditional_delete is self.conditional_delete

    def test_absent_creates_once(self, store: Store) -> None:
        assert store.commit_many([("a/k", b"first", ABSENT)]) == [True]
        second = store.commit_many([("a/k", b"second", ABSENT)])
        if self.conditional_writes:
            assert second == [False] and store.get("a/k") == b"first"
        else:
            assert second == [True] and store.get("a/k") == b"second"

    def test_stale_generation_fails_fresh_one_applies(self, store: Store) -> None:
        store.set("c/0", b"v1")
        value, generation = store.get_versioned("c/0")
        assert value == b"v1"
        store.set("c/0", b"v2")  # another writer replaces the object
        applied = store.set_if("c/0", b"from-v1", generation)
        if not self.conditional_writes:
            assert applied and store.get("c/0") == b"from-v1"
            return
        assert not applied and store.get("c/0") == b"v2"
        value, generation = store.get_versioned("c/0")
        assert value == b"v2"
        assert store.set_if("c/0", b"from-v2", generation)
        assert store.get("c/0") == b"from-v2"
        assert not store.set_if("c/0", b"again", generation)  # used up by the commit

    def test_same_size_different_content_replacement(self, store: Store) -> None:
        """A replacement by identical bytes may pass the check (harmless); different
        bytes of the same size must not."""
        store.set("k", b"aaaa")
        _, generation = store.get_versioned("k")
        store.set("k", b"bbbb")
        applied = store.set_if("k", b"cccc", generation)
        if self.conditional_writes:
            assert not applied and store.get("k") == b"bbbb"
        else:
            assert applied and store.get("k") == b"cccc"

    def test_any_always_applies(self, store: Store) -> None:
        assert store.commit_many([("x", b"1", ANY), ("y/z", b"2", ANY)]) == [True, True]
        assert store.commit_many([("x", b"3", ANY), ("y/z", None, ANY)]) == [True, True]
        assert store.get("x") == b"3" and store.get("y/z") is None
        assert store.commit_many([("never/was", None, ANY)]) == [True]

    def test_delete_with_generation(self, store: Store) -> None:
        store.set("d/k", b"v1")
        _, old = store.get_versioned("d/k")
        store.set("d/k", b"v2")
        _, current = store.get_versioned("d/k")
        if self.conditional_delete:
            assert store.set_if("d/k", None, old) is False and store.get("d/k") == b"v2"
            assert store.set_if("d/k", None, current) is True
            assert store.get("d/k") is None and store.get_versioned("d/k") == (None, ABSENT)
            assert store.set_if("d/k", b"x", current) is False  # gone: If-Match fails
        else:
            assert store.set_if("d/k", None, current) is True and store.get("d/k") is None

    def test_batch_reports_each_item(self, store: Store) -> None:
        store.set_many({"b/1": b"1", "b/2": b"2"})
        found = store.get_versioned_many(["b/1", "b/2", "b/missing"])
        assert [v for v, _ in found] == [b"1", b"2", None] and found[2][1] is ABSENT
        store.set("b/2", b"changed")
        result = store.commit_many([("b/1", b"1+", found[0][1]), ("b/2", b"2+", found[1][1]),
                                    ("b/missing", b"new", ABSENT), ("b/3", b"3", ANY)])
        if self.conditional_writes:
            assert result == [True, False, True, True]
            assert store.get("b/2") == b"changed"
        else:
            assert result == [True] * 4
        assert store.get("b/1") == b"1+" and store.get("b/missing") == b"new"
