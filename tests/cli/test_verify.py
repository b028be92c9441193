"""``verify``: exit 1 listing bad keys; shards and their inner chunks counted explicitly; a
broken metadata document below the root reported without hiding the rest."""

from __future__ import annotations

import shutil

import numpy as np

import chunkstore as cs


def test_clean_store(cli):
    result = cli("verify", "s.zarr")
    assert result.status == 0
    assert result.out.splitlines() == ["2 arrays checked: 12 chunks, 0 bad"]


def test_sharded_counts(cli):
    result = cli("verify", "sharded.zarr")
    assert result.out.splitlines() == ["1 array checked: 9 shards (30 chunks), 0 bad"]


def test_bad_chunks_and_metadata_are_listed(cli, samples, tmp_path):
    copy = tmp_path / "c.zarr"
    shutil.copytree(samples / "s.zarr", copy)
    (copy / "x" / "c" / "1" / "2").write_bytes(b"garbage")
    cs.array(np.arange(4), store=str(copy), path="sub/broken", chunks=(2,))
    (copy / "sub" / "broken" / "zarr.json").write_text("{not json")
    result = cli("verify", str(copy))
    assert result.status == 1
    lines = result.out.splitlines()
    assert lines[0].startswith("BAD sub/broken: cannot open: ") and "zarr.json" in lines[0]
    assert lines[1].startswith("BAD x/c/1/2: ")
    assert lines[-1] == "2 arrays checked: 12 chunks, 2 bad"


def test_sharded_bad_shard(cli, samples, tmp_path):
    copy = tmp_path / "sh.zarr"
    shutil.copytree(samples / "sharded.zarr", copy)
    (copy / "c" / "0" / "1").write_bytes(b"\0" * 10)
    result = cli("verify", str(copy))
    assert result.status == 1 and result.out.startswith("BAD c/0/1: ")
    assert result.out.splitlines()[-1] == "1 array checked: 9 shards (30 chunks), 1 bad"
