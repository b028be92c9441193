"""CI runs the conditional-commit benchmark at tiny size so it never rots (no timing asserts)."""

from benchmarks import bench_commit


def test_bench_commit_tiny():
    rows = bench_commit.main(["--tiny"])
    cases = {(r["case"], r["library"]) for r in rows}
    assert ("aligned", "chunkstore") in cases and ("unaligned", "chunkstore") in cases
    shard = [r for r in rows if r["case"] == "one-shard-4-writers"]
    assert shard and all(r["correct"] for r in shard)  # 4 writers of one shard lose nothing
    assert all(r["mb_per_s"] > 0 for r in rows)
