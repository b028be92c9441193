"""The machine's limit bench_rechunk prints each row's fraction of (issue 35)."""

import numpy as np

import chunkstore as cs
from benchmarks.rechunk_limit import plan_stages, run_limit


def test_limit_passes_over_every_chunk_once_per_stage(tmp_path):
    src = tmp_path / "src.zarr"
    a = cs.create_array(str(src), shape=(256, 256), chunks=(256, 8), dtype="f4",
                        zarr_format=2)
    a[...] = np.random.default_rng(0).standard_normal((256, 256), dtype="f4")
    # a corner turn that does not fit in one stage: chunkstore plans two
    stages = plan_stages(src, (8, 256), 300_000, None)
    assert stages == 2
    assert plan_stages(src, (256, 8), 300_000, None) == 1
    row = run_limit(src, tmp_path / "work", stages)
    assert row["stages"] == 2 and row["wall_s"] > 0 and row["cpu_s"] >= 0
    assert len(row["peak_rss_mb"]) == 2
    assert not list((tmp_path / "work").glob("limit-stage-*/*"))  # its files removed


def test_a_pass_writes_the_sources_bytes(tmp_path):
    # decoded and encoded again as the array's dtype: blosc shuffles by item size, so the
    # limit does the methods' encoding work, not a byte-wise (unshuffled) one
    import json

    from benchmarks.rechunk_limit import _pass
    src = tmp_path / "src.zarr"
    a = cs.create_array(str(src), shape=(64, 64), chunks=(64, 8), dtype="f4", zarr_format=2)
    a[...] = np.random.default_rng(1).standard_normal((64, 64), dtype="f4")
    out = tmp_path / "out"
    out.mkdir()
    meta = json.loads((src / ".zarray").read_text())
    names = sorted(p.name for p in src.iterdir() if not p.name.startswith("."))
    assert len(names) == 8
    _pass((str(src), str(out), names, meta["compressor"], meta["dtype"], 64 * 8, None, True, True))
    assert {n: (out / n).read_bytes() for n in names} == {
        n: (src / n).read_bytes() for n in names}
    # a first and a last stage: raw bytes between them, the source's bytes at the end
    raw, again = tmp_path / "raw", tmp_path / "again"
    raw.mkdir(), again.mkdir()
    _pass((str(src), str(raw), names, meta["compressor"], meta["dtype"], 64 * 8, None, True, False))
    values = a[...]
    for n in names:  # chunk "0.j" holds columns 8j .. 8j + 7, decoded in C order
        j = int(n.split(".")[1])
        assert (raw / n).read_bytes() == np.ascontiguousarray(values[:, 8 * j:8 * j + 8]
                                                              ).tobytes()
    middle = tmp_path / "middle"  # a stage between two others: raw in, raw out
    middle.mkdir()
    _pass((str(raw), str(middle), names, meta["compressor"], meta["dtype"], 64 * 8, None,
           False, False))
    assert all((middle / n).read_bytes() == (raw / n).read_bytes() for n in names)
    _pass((str(middle), str(again), names, meta["compressor"], meta["dtype"], 64 * 8, None,
           False, True))
    assert {n: (again / n).read_bytes() for n in names} == {
        n: (src / n).read_bytes() for n in names}
