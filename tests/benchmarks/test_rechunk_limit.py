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
