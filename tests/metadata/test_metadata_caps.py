"""Issue 30 item 6: a metadata document is measured before it is parsed. One larger than
``metadata.max_bytes`` or holding more JSON values than ``metadata.max_elements`` is
refused with a MetadataError naming it and the setting to raise (a 29 MiB ``zarr.json``
of 10 million empty objects once cost 1.5 GB and 41 s to open; the depth check walked
every element again). The scan is linear and allocates a few MiB whatever the size:
checked here by memory, not time (caps lowered to keep the documents small)."""

from __future__ import annotations

import json
import random
import tracemalloc

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.cli.main import main
from chunkstore.errors import MetadataError
from chunkstore.metadata import json_io, json_scan
from chunkstore.metadata.json_io import MAX_JSON_DEPTH, check_document, load_json

V3 = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
      "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
      "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
      "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}


@pytest.fixture(autouse=True)
def _defaults():
    cs.config.reset()
    yield
    cs.config.reset()


def _empties(n: int) -> bytes:
    """A v3 array document whose attributes hold ``n`` empty objects (as in the issue)."""
    head = json.dumps({**V3, "attributes": {"x": []}})[:-4].encode()
    return head + b"[" + b",".join([b"{}"] * n) + b"]}}"


def _store_with(tmp_path, raw: bytes, key: str = "zarr.json"):
    root = tmp_path / "a.zarr"
    root.mkdir()
    (root / key).write_bytes(raw)
    return root


def test_defaults_and_validation():
    assert cs.config.get("metadata.max_bytes") == 64 * 2**20
    assert cs.config.get("metadata.max_elements") == 8 * 2**20
    with cs.config.set({"metadata.max_bytes": "1MiB", "metadata.max_elements": 10.0}):
        assert cs.config.get("metadata") == {"max_bytes": 2**20, "max_elements": 10}
    for key, bad in [("metadata.max_bytes", 0), ("metadata.max_bytes", "lots"),
                     ("metadata.max_elements", 0), ("metadata.max_elements", True),
                     ("metadata.max_elements", "10")]:
        with pytest.raises(ValueError, match=f"'{key}' must be"):
            cs.config.set({key: bad})
    assert cs.config.get("metadata.max_elements") == 8 * 2**20


def test_the_issue_document_is_refused_at_the_default_cap(tmp_path):
    """10 M empty objects (29 MiB) at the default caps: refused by the scan, not parsed
    (a lowered byte count keeps the test small: 2 M objects against a cap of 1 M)."""
    with cs.config.set({"metadata.max_elements": 2**20}):
        root = _store_with(tmp_path, _empties(2 * 2**20))
        with pytest.raises(MetadataError) as e:
            cs.open(str(root), mode="r")
    msg = str(e.value)
    assert f"{root}/zarr.json" in msg and "'metadata.max_elements'" in msg
    assert "4194" in msg and "more than the 1048576" in msg  # ~2 values per {} counted


def test_over_the_byte_cap_is_refused_before_parsing(tmp_path):
    """Not even valid JSON: the size is checked first (so a huge document costs nothing
    but the read)."""
    raw = b'{"zarr_format": 3, ' + b" " * 5000 + b"not json"
    root = _store_with(tmp_path, raw)
    with cs.config.set({"metadata.max_bytes": 4096}):
        with pytest.raises(MetadataError, match=r"a\.zarr/zarr\.json: the document has 5027 "
                           r"bytes, more than the 4096 .*'metadata\.max_bytes': raise it to "
                           "open"):
            cs.open(str(root), mode="r")
    with pytest.raises(MetadataError, match="malformed JSON"):  # the default cap lets it in
        cs.open(str(root), mode="r")


def test_raising_the_cap_opens_the_document(tmp_path):
    root = _store_with(tmp_path, _empties(3000))
    with cs.config.set({"metadata.max_elements": 5000}):
        with pytest.raises(MetadataError, match="metadata.max_elements"):
            cs.open(str(root), mode="r")
    with cs.config.set({"metadata.max_elements": 7000}):
        a = cs.open(str(root), mode="r")
    assert a.attrs["x"] == [{}] * 3000
    np.testing.assert_array_equal(a[:], np.zeros(4, "i4"))


def test_scan_allocates_little_and_never_parses(monkeypatch):
    """The check of a 6 MiB document of 2 M empty objects (a parse would build 2 M
    dicts, ~150 MB) allocates a few MiB, and json.loads is never called."""
    raw = _empties(2 * 2**20)
    monkeypatch.setattr(json_io.json, "loads", lambda *a, **k: pytest.fail("parsed"))
    tracemalloc.start()
    try:
        with cs.config.set({"metadata.max_elements": 2**20}), \
                pytest.raises(MetadataError, match="max_elements"):
            load_json(raw, "doc")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak


def test_commas_and_brackets_in_strings_do_not_count():
    text = "[" * 200 + ",{}" * 5000 + "]" * 200  # would be deep and many values
    raw = json.dumps({"a": text, "b": [1, 2, 3]}).encode()
    with cs.config.set({"metadata.max_elements": 10}):
        assert load_json(raw, "doc") == {"a": text, "b": [1, 2, 3]}
        with pytest.raises(MetadataError, match="about 11 JSON values"):
            load_json(json.dumps({"a": text, "b": list(range(8))}).encode(), "doc")


def test_v2_documents_and_consolidated_metadata_are_capped(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = cs.group(path, zarr_format=2)
    g.create_array("x", shape=(4,), chunks=(2,), dtype="i4").attrs["big"] = list(range(3000))
    cs.consolidate_metadata(path)
    with cs.config.set({"metadata.max_elements": 1000}):
        with pytest.raises(MetadataError, match=r"g\.zarr/\.zmetadata: .*max_elements"):
            cs.open_consolidated(path)
        with pytest.raises(MetadataError, match=r"g\.zarr/x/\.zattrs: .*max_elements"):
            cs.open_array(path, mode="r", path="x")
    assert cs.open_consolidated(path)["x"].attrs["big"] == list(range(3000))


@pytest.mark.parametrize("fmt", [2, 3])
def test_writing_a_document_over_the_cap_is_refused_and_changes_nothing(tmp_path, fmt):
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=(4,), chunks=(2,), dtype="i4",
                        zarr_format=fmt, attributes={"keep": 1})
    key = "zarr.json" if fmt == 3 else ".zattrs"
    before = (tmp_path / "a.zarr" / key).read_bytes()
    with cs.config.set({"metadata.max_elements": 1000}):
        with pytest.raises(MetadataError, match=rf"{key}.*'metadata.max_elements': raise it "
                           "to write"):
            a.attrs["x"] = list(range(2000))
    assert (tmp_path / "a.zarr" / key).read_bytes() == before
    assert dict(cs.open(str(tmp_path / "a.zarr"), mode="r").attrs) == {"keep": 1}


def test_cli_reports_the_cap_in_one_line(tmp_path, capsys):
    root = _store_with(tmp_path, _empties(3000))
    with cs.config.set({"metadata.max_elements": 1000}):
        assert main(["info", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "zarr.json" in err[0] and "metadata.max_elements" in err[0]


def test_too_deep_past_a_block_names_the_field(monkeypatch):
    """The field holding the overflow is named even when a long benign field (with
    quotes, escapes and brackets in strings) comes first, over many scan blocks."""
    monkeypatch.setattr(json_scan, "BLOCK", 64)
    benign = {"s": ['a\\"[{,:' * 3, {"k:\\": [[1], "}"]}] * 40}
    deep = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    raw = (json.dumps({"first": benign})[:-1] + ', "de\\"ep": ' + deep + "}").encode()
    with pytest.raises(MetadataError, match=r"doc: field 'de\"ep' nests JSON deeper than "
                       f"{MAX_JSON_DEPTH} levels"):
        load_json(raw, "doc")
    ok = (json.dumps({"first": benign})[:-1] + ', "x": ' + deep[1:-1] + "}").encode()
    assert list(load_json(ok, "doc")) == ["first", "x"]


# -- the scan against a reference ---------------------------------------------------------
def _random_value(rng: random.Random, depth: int):
    kind = rng.random()
    if depth > 6 or kind < 0.35:
        return rng.choice([0, -1.5, True, None, "", '\\"', "a\\", "[{,:}]", '"', "\u00e9\\\\",
                           "x" * rng.randrange(20)])
    if kind < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {rng.choice(["a", "[", '"', "\\", "k,"]) + str(i): _random_value(rng, depth + 1)
            for i in range(rng.randrange(5))}


def _reference(value, depth: int = 1) -> tuple[int, int]:
    """(openers + commas + 1 as the scan counts, deepest nesting) from the parsed value."""
    if isinstance(value, dict | list):
        items = list(value.values()) if isinstance(value, dict) else value
        count, deepest = 1 + max(0, len(items) - 1), depth
        for item in items:
            c, d = _reference(item, depth + 1)
            count += c - 1
            deepest = max(deepest, d)
        return count + 1, deepest
    return 1, depth - 1


@pytest.mark.parametrize("block", [8, 16, 64, json_scan.BLOCK])
def test_scan_matches_the_parsed_document(monkeypatch, block):
    monkeypatch.setattr(json_scan, "BLOCK", block)
    rng = random.Random(block)
    for _ in range(60):
        value = {"v": _random_value(rng, 1)}
        text = json.dumps(value, indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5)
        values, deepest = _reference(value)
        got = json_scan.outline(text.encode(), 64)
        assert got.values == values and got.too_deep_at == -1, text
        if deepest > 1:
            over = json_scan.outline(text.encode(), deepest - 1, find_field=True)
            assert over.too_deep_at >= 0 and over.field == "v", text
            assert text.encode()[over.too_deep_at] in b"[{"


def test_utf16_documents_are_measured_too():
    raw = json.dumps({"a": [{}] * 50}).encode("utf-16")
    with cs.config.set({"metadata.max_elements": 60}):
        with pytest.raises(MetadataError, match="about 102 JSON values"):
            check_document(raw, "doc")
    assert load_json(raw, "doc") == {"a": [{}] * 50}
