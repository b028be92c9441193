"""Issue 15, item 7: info, ls, tree and attrs show what h5ls / ncdump -h show, with the same
chunk/shard words everywhere; --version; every option has help text and a default."""

from __future__ import annotations

import argparse
import json

import pytest

from chunkstore.cli import build_parser


def test_version(cli):
    result = cli("--version")
    assert result.status == 0
    assert result.out.startswith("chunkstore 0.") and "numpy" in result.out and "dask" in result.out
    assert "s3fs" in result.out and "obstore" in result.out  # the two S3 clients


def test_info_array_shows_attributes_dimensions_codec_chain(cli):
    result = cli("info", "s.zarr", "--node", "x")
    assert result.status == 0 and result.err == ""
    rows = dict(line.split(" : ", 1) for line in result.out.splitlines())
    rows = {k.strip(): v for k, v in rows.items()}
    assert rows["Name"] == "/x" and rows["Shape"] == "(20, 30)" and rows["Data type"] == "int32"
    assert rows["Dimension names"] == "y, x"
    assert rows["Codecs"] == "bytes(little) -> blosc(lz4, clevel 5, shuffle)"
    assert json.loads(rows["Attributes"]) == {"units": "m", "long_name": "test field"}
    assert rows["Chunk shape"] == "(8, 8)" and rows["Chunks initialized"] == "12/12"
    assert "Shard shape" not in rows


def test_info_sharded_shows_shards_and_chunks(cli):
    out = cli("info", "sharded.zarr").out
    rows = {k.strip(): v for k, v in (line.split(" : ", 1) for line in out.splitlines())}
    assert rows["Name"] == "/" and rows["Shard shape"] == "(8, 10)"
    assert rows["Chunk shape"] == "(4, 5) (2 x 2 chunks per shard)"
    assert rows["Shards initialized"] == "9/9" and rows["Chunks initialized"] == "30/30"
    assert rows["Codecs"].startswith("sharding(chunks (4, 5): bytes(little) -> blosc(lz4")
    assert rows["Codecs"].endswith("index at end: bytes(little) -> crc32c)")


def test_info_v2_codec_chain_and_group(cli):
    out = cli("info", "v2.zarr").out
    assert "array (Zarr v2)" in out and "blosc(lz4, clevel 5, shuffle)" in out
    out = cli("info", "s.zarr").out
    assert "group (Zarr v3)" in out and "1 array, 1 group" in out


def test_ls_words_and_root_array_name(cli):
    lines = cli("ls", "sharded.zarr").out.splitlines()
    assert lines == ["/  array  (20, 30)  float32  shards=(8, 10) chunks=(4, 5)  v3"]
    out = cli("ls", "s.zarr").out.splitlines()
    assert [line.split()[:2] for line in out] == [["sub", "group"], ["x", "array"]]
    assert "chunks=(8, 8)" in out[1]
    recursive = cli("ls", "-r", "s.zarr").out
    assert "sub/z" in recursive and "chunks=(2,)" in recursive
    assert cli("ls", "s.zarr", "--node", "x").out.split()[0] == "/x"


def test_tree_and_attrs(cli):
    tree = cli("tree", "s.zarr").out
    assert tree.splitlines()[0] == "/" and "x (20, 30) int32" in tree and "z (4,) float64" in tree
    result = cli("attrs", "s.zarr", "--node", "x")
    assert result.status == 0
    assert json.loads(result.out) == {"units": "m", "long_name": "test field"}
    assert json.loads(cli("attrs", "s.zarr").out) == {}


def _options(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {o}", a) for o, a in _options_of(sub))
    yield from (("chunkstore " + o, a) for o, a in _options_of(parser))


def _options_of(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield action.option_strings[-1], action


def test_every_option_has_help_with_its_default():
    options = list(_options(build_parser()))
    assert len(options) > 20
    for name, action in options:
        assert action.help, name
        assert "default" in action.help or action.required, (name, action.help)


@pytest.mark.parametrize("command", ["info", "tree", "ls", "attrs", "dump", "copy", "convert",
                                     "rechunk", "verify", "demo"])
def test_help_of_every_command(cli, command):
    result = cli(command, "--help")
    assert result.status == 0 and "(default: " in result.out


def test_negative_numbers_are_values(cli, tmp_path):
    """``--chunks -1,16`` (issue 15, item 4) and ``--selection -2:, -1``."""
    out = str(tmp_path / "neg.zarr")
    result = cli("convert", "s.zarr", out, "--node", "x", "--chunks", "-1,16")
    assert result.status == 0, result.err
    assert "chunks=(20, 16)" in cli("ls", out).out
    result = cli("rechunk", "s.zarr", str(tmp_path / "r.zarr"), "--node", "x", "--chunks", "-1,5")
    assert result.status == 0, result.err
    result = cli("dump", "s.zarr", "--node", "x", "--selection", "-1, -2:")
    assert result.status == 0 and result.out.rstrip().endswith("[598, 599]")
