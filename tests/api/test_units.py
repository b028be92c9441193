"""Issue 34, item 5: byte sizes are written one way everywhere, dask's (MB = 10**6,
MiB = 2**20), and a round size shows as it was given (``--max-mem 512MB`` prints
``max_mem 512 MB``, not the binary value labelled MB)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.cli import main
from chunkstore.sizes import format_bytes, parse_bytes


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (999, "999 B"), (1000, "1 kB"), (1024, "1 KiB"), (1500, "1.5 kB"),
    (512 * 10**6, "512 MB"), (256 * 2**20, "256 MiB"), (int(1.5 * 2**30), "1.5 GiB"),
    (7_600_000_000, "7.6 GB"), (10**12, "1 TB"),
    (500_000_123, "476.8 MiB"),  # not round: binary, as dask.utils.format_bytes
    (145_584 * 1024, "142.2 MiB"),  # round in KiB only: not "145584 KiB"
    (1234567, "1.2 MiB"), (2.0**20, "1 MiB"), (-4096, "-4 KiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("given", ["512MB", "256MiB", "1.5GiB", "64kB", "3GB"])
def test_round_sizes_come_back_as_given(given):
    number, unit = re.fullmatch(r"([\d.]+)(\w+)", given).groups()
    assert format_bytes(parse_bytes(given)) == f"{number} {unit}"


def _labelled_sizes(text: str) -> list[tuple[float, str]]:
    return [(float(v), u) for v, u in re.findall(r"([\d.]+) ?(B|kB|MB|GB|KiB|MiB|GiB)\b", text)]


def test_plan_text_labels_match_values(tmp_path):
    a = cs.array(np.zeros((256, 256), "f4"), store=str(tmp_path / "a.zarr"), chunks=(16, 256))
    for given, shown in (("512MB", "max_mem 512 MB"), ("256MiB", "max_mem 256 MiB"),
                         (3_000_000, "max_mem 3 MB")):
        plan = csd.rechunk(a, (256, 16), str(tmp_path / f"b{len(shown)}.zarr"), max_mem=given)
        text = str(plan.describe())
        assert f"({shown})" in text, text
        figures = plan.describe()
        assert f"peak ~{format_bytes(figures['peak_task_memory'])} per task" in text
        assert not re.search(r"\d(MB|GB)\b", text), text  # the old "488.3MB" spelling
    sim = plan.simulate(workers=2, threads_per_worker=1, worker_memory="1GiB",
                        throughput="100MB")
    assert "x 1 GiB, 100 MB/s per thread" in str(sim), str(sim)


def test_cli_plan_says_max_mem_as_given(tmp_path, capsys):
    cs.array(np.arange(4096, dtype="i4").reshape(64, 64), store=str(tmp_path / "a.zarr"),
             chunks=(8, 64))
    status = main(["rechunk", str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr"), "--chunks",
                   "64,8", "--max-mem", "512MB"])
    err = capsys.readouterr().err
    assert status == 0 and "(max_mem 512 MB)" in err, err
    assert "488.3" not in err


def test_info_tables_use_the_same_units(tmp_path, capsys):
    a = cs.array(np.zeros((512, 1024), "f4"), store=str(tmp_path / "a.zarr"), chunks=(64, 1024))
    assert a.info["No. bytes"] == "2097152 (2 MiB)"
    assert main(["info", str(tmp_path / "a.zarr")]) == 0
    out = capsys.readouterr().out
    assert "No. bytes          : 2097152 (2 MiB)" in out
    sizes = _labelled_sizes(out)
    assert sizes and all(u in ("B", "kB", "MB", "KiB", "MiB") for _, u in sizes)
