"""The cluster-scale planning benchmark runs at tiny size so it never rots."""

from benchmarks import bench_cluster


def test_bench_cluster_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (row,) = bench_cluster.main(["--tiny", "--throughput", "50MB"])
    assert row["tasks"] >= 1 and row["graph_tasks"] == row["tasks"] + 3
    assert row["fits"] and row["wall_s"] > 0
    assert (tmp_path / "bench-out" / "bench_cluster.json").exists()
