"""Move the test files into directories that mirror chunkstore's packages (issue 31).

Run from the repository root: ``python tests/layout_moves.py`` (``--dry-run`` prints what
it would do). It ``git mv``s each file of ``MOVES`` (red-team round files get a name by
subject), creates the packages' ``__init__.py`` files (tests/ is a package: tests import
``tests.multiproc`` and one another's modules), and fixes what names the old places:

* imports of moved test modules (``from tests.test_contract import ...``,
  ``from tests.storage import test_stores``) and relative imports in moved files;
* paths built from ``__file__`` in moved files (``parents[N]``, ``.parent`` chains,
  nested ``os.path.dirname``), by the change of depth;
* mentions of the old paths in the tests, tests/newest_zarr.sh, README.md, docs/,
  docker-compose.yml and benchmarks/ (and bare names of renamed files in the tests).

The helpers (conftest.py, multiproc.py, cache_settle.py, compose_services.py,
notebook_helpers.py, write_checks.py, newest_zarr.sh) and the whole-package tests
(test_import_cycles.py, test_python_versions.py) stay at the top of tests/. Files already
moved are skipped, so running it again does nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: old path -> new path (from the repository root), grouped by chunkstore package
MOVES: dict[str, str] = {
    # -- chunkstore/api (creation, opening, persistence, copying, hdf5) and the contract
    "tests/test_api_wrong_answers.py": "tests/api/test_api_wrong_answers.py",
    "tests/test_contract.py": "tests/api/test_contract.py",
    "tests/test_contract_gaps.py": "tests/api/test_contract_gaps.py",
    "tests/test_contract_hierarchy.py": "tests/api/test_contract_hierarchy.py",
    "tests/test_from_array_onto_itself.py": "tests/api/test_from_array_onto_itself.py",
    "tests/test_hdf5_sources.py": "tests/api/test_hdf5_sources.py",
    "tests/test_saving.py": "tests/api/test_saving.py",
    "tests/test_stale_warning_export.py": "tests/api/test_stale_warning_export.py",
    "tests/test_units.py": "tests/api/test_units.py",
    "tests/test_zarr34_api.py": "tests/api/test_zarr34_api.py",
    "tests/test_red_team_args.py": "tests/api/test_argument_attacks.py",
    # -- chunkstore/array
    "tests/test_array.py": "tests/array/test_array.py",
    "tests/test_self_reading_any_size.py": "tests/array/test_self_reading_any_size.py",
    "tests/test_self_reading_values.py": "tests/array/test_self_reading_values.py",
    "tests/test_red_team_round6_aliasing.py": "tests/array/test_write_aliasing_attacks.py",
    "tests/test_red_team_round9_arrays.py": "tests/array/test_sharded_array_attacks.py",
    # -- chunkstore/group
    "tests/test_group.py": "tests/group/test_group.py",
    "tests/test_group_zarr3_names.py": "tests/group/test_group_zarr3_names.py",
    "tests/test_red_team_round10_hierarchy.py": "tests/group/test_hierarchy_attacks.py",
    # -- chunkstore/nodes (documents, attributes, consolidated copies, creation)
    "tests/test_consolidated_concurrency.py": "tests/nodes/test_consolidated_concurrency.py",
    "tests/test_consolidated_crash.py": "tests/nodes/test_consolidated_crash.py",
    "tests/test_consolidated_refresh.py": "tests/nodes/test_consolidated_refresh.py",
    "tests/test_create_races.py": "tests/nodes/test_create_races.py",
    "tests/test_group_attrs_concurrency.py": "tests/nodes/test_group_attrs_concurrency.py",
    "tests/test_red_team_metadata.py": "tests/nodes/test_metadata_rmw_attacks.py",
    # round 8: groups and consolidated copies under concurrent processes (also S3, CLI)
    "tests/test_red_team_round8.py": "tests/nodes/test_consolidated_race_attacks.py",
    # -- chunkstore/indexing
    "tests/test_indexing_errors.py": "tests/indexing/test_indexing_errors.py",
    "tests/test_indexing_numpy_mixed.py": "tests/indexing/test_indexing_numpy_mixed.py",
    "tests/test_indexing_property.py": "tests/indexing/test_indexing_property.py",
    # -- chunkstore/codecs
    "tests/test_fill_bits.py": "tests/codecs/test_fill_bits.py",
    "tests/test_hostile_payloads.py": "tests/codecs/test_hostile_payloads.py",
    "tests/test_serializer.py": "tests/codecs/test_serializer.py",
    "tests/test_shard_chains.py": "tests/codecs/test_shard_chains.py",
    "tests/test_sharding.py": "tests/codecs/test_sharding.py",
    "tests/test_red_team_round3_serializer.py": "tests/codecs/test_serializer_attacks.py",
    "tests/test_red_team_round4_buffers.py": "tests/codecs/test_scratch_buffer_attacks.py",
    "tests/test_red_team_round5_peers.py": "tests/codecs/test_bounds_of_peer_chunks_attacks.py",
    "tests/test_round9_fixes.py": "tests/codecs/test_shard_index_bounds.py",
    # -- chunkstore/metadata
    "tests/test_dtypes_extra.py": "tests/metadata/test_dtypes_extra.py",
    "tests/test_fuzz.py": "tests/metadata/test_fuzz.py",
    # -- chunkstore/io (engine, writes, reads, resize, sync, overlap)
    "tests/test_chunk_units.py": "tests/io/test_chunk_units.py",
    "tests/test_crash_safety.py": "tests/io/test_crash_safety.py",
    "tests/test_prefetch.py": "tests/io/test_prefetch.py",
    "tests/test_read_memory.py": "tests/io/test_read_memory.py",
    "tests/test_resize_sparse.py": "tests/io/test_resize_sparse.py",
    "tests/test_sync.py": "tests/io/test_sync.py",
    "tests/test_synchronizer_aliases.py": "tests/io/test_synchronizer_aliases.py",
    "tests/test_write_buffers.py": "tests/io/test_write_buffers.py",
    "tests/test_write_model.py": "tests/io/test_write_model.py",
    "tests/test_write_safety.py": "tests/io/test_write_safety.py",
    "tests/test_write_strided.py": "tests/io/test_write_strided.py",
    "tests/test_red_team_concurrency.py": "tests/io/test_concurrency_attacks.py",
    "tests/test_red_team_crash.py": "tests/io/test_crash_attacks.py",
    "tests/test_red_team_overlap.py": "tests/io/test_overlap_attacks.py",
    "tests/test_red_team_round3_ranges.py": "tests/io/test_range_read_attacks.py",
    "tests/test_red_team_round3_writes.py": "tests/io/test_write_path_attacks.py",
    "tests/test_red_team_round6_processes.py": "tests/io/test_multiprocess_write_attacks.py",
    "tests/test_red_team_round6_writes.py": "tests/io/test_write_unit_attacks.py",
    # round 7: concurrent resize/append and partial shard writes (also rechunk, zip)
    "tests/test_red_team_round7.py": "tests/io/test_resize_and_shard_race_attacks.py",
    # -- chunkstore/io/cache
    "tests/test_cache_argument.py": "tests/io/cache/test_cache_argument.py",
    "tests/test_cache_generations.py": "tests/io/cache/test_cache_generations.py",
    "tests/test_cache_sizes.py": "tests/io/cache/test_cache_sizes.py",
    "tests/test_chunk_cache.py": "tests/io/cache/test_chunk_cache.py",
    "tests/test_chunk_cache_sharded.py": "tests/io/cache/test_chunk_cache_sharded.py",
    "tests/test_chunk_cache_sharded_races.py": "tests/io/cache/test_chunk_cache_sharded_races.py",
    "tests/test_red_team_round3_cache.py": "tests/io/cache/test_cache_attacks.py",
    "tests/test_red_team_round4_cache.py": "tests/io/cache/test_cache_alias_attacks.py",
    # -- chunkstore/runtime (pools, buffers)
    "tests/test_buffer_pool.py": "tests/runtime/test_buffer_pool.py",
    "tests/test_concurrency_inline.py": "tests/runtime/test_concurrency_inline.py",
    "tests/test_run_streamed.py": "tests/runtime/test_run_streamed.py",
    "tests/test_red_team_round5_pool.py": "tests/runtime/test_buffer_pool_attacks.py",
    # round 5 fixes: the buffer pool's budgets (also a shard's unused space, Categorize)
    "tests/test_red_team_round5_fixes.py": "tests/runtime/test_buffer_pool_fixes.py",
    # -- chunkstore/config
    "tests/test_config_validation.py": "tests/config/test_config_validation.py",
    "tests/test_red_team_round4_config.py": "tests/config/test_config_attacks.py",
    # -- chunkstore/storage (shared parts: bounds, location, s3 backend choice, events)
    "tests/test_bounded_reads.py": "tests/storage/test_bounded_reads.py",
    "tests/test_bounded_reads_s3.py": "tests/storage/test_bounded_reads_s3.py",
    "tests/test_location_spellings.py": "tests/storage/test_location_spellings.py",
    "tests/test_s3_conditional.py": "tests/storage/test_s3_conditional.py",
    "tests/test_store_write_events.py": "tests/storage/test_store_write_events.py",
    "tests/test_red_team_round5_s3.py": "tests/storage/test_s3_backends_attacks.py",
    "tests/storage/test_red_team_round10_storage.py": "tests/storage/test_storage_attacks.py",
    # -- chunkstore/storage/local
    "tests/test_confinement.py": "tests/storage/local/test_confinement.py",
    "tests/test_indexing_local_views.py": "tests/storage/local/test_local_views.py",
    "tests/test_read_rows.py": "tests/storage/local/test_read_rows.py",
    "tests/test_write_rows.py": "tests/storage/local/test_write_rows.py",
    "tests/test_red_team_confinement.py": "tests/storage/local/test_confinement_attacks.py",
    "tests/test_red_team_hostile.py": "tests/storage/local/test_hostile_file_attacks.py",
    "tests/storage/test_local_get_many.py": "tests/storage/local/test_local_get_many.py",
    "tests/storage/test_local_safety.py": "tests/storage/local/test_local_safety.py",
    "tests/storage/test_local_session.py": "tests/storage/local/test_local_session.py",
    # -- chunkstore/storage/zip
    "tests/test_zip_overwrite_node.py": "tests/storage/zip/test_zip_overwrite_node.py",
    "tests/storage/test_zip_replacement_identity.py":
        "tests/storage/zip/test_zip_replacement_identity.py",
    "tests/storage/test_zip_safety.py": "tests/storage/zip/test_zip_safety.py",
    # -- chunkstore/storage/fsspec (requests s3fs sends)
    "tests/storage/test_request_counts.py": "tests/storage/fsspec/test_request_counts.py",
    # -- chunkstore/storage/obstore
    "tests/test_obstore_s3.py": "tests/storage/obstore/test_obstore_s3.py",
    "tests/test_red_team_round3_obstore.py": "tests/storage/obstore/test_obstore_attacks.py",
    "tests/test_red_team_round4_obstore.py": "tests/storage/obstore/test_obstore_exactness_attacks.py",
    # -- chunkstore/rechunk (pure planning)
    "tests/dask/test_planner.py": "tests/rechunk/test_planner.py",
    # -- chunkstore/dask
    "tests/test_red_team_features.py": "tests/dask/test_edge_shape_attacks.py",
    "tests/test_red_team_round4_dask.py": "tests/dask/test_rechunk_attacks.py",
    "tests/dask/test_red_team_round9_dask.py": "tests/dask/test_dask_io_attacks.py",
    # -- chunkstore/cli
    "tests/test_demo.py": "tests/cli/test_demo.py",
    "tests/test_round8_fixes.py": "tests/cli/test_verify_and_clean_fixes.py",
    "tests/cli/test_newcomer_round3.py": "tests/cli/test_newcomer_hints.py",
    # -- chunkstore/xarray_backend (not in tests/interop: newest_zarr.sh runs that without xarray)
    "tests/test_xarray_backend.py": "tests/xarray/test_xarray_backend.py",
    "tests/test_xarray_interop.py": "tests/xarray/test_xarray_interop.py",
    # -- benchmarks/ smoke tests
    "tests/test_bench_cache_smoke.py": "tests/benchmarks/test_bench_cache_smoke.py",
    "tests/test_bench_commit_smoke.py": "tests/benchmarks/test_bench_commit_smoke.py",
    "tests/test_bench_indexing_smoke.py": "tests/benchmarks/test_bench_indexing_smoke.py",
    "tests/test_bench_isolation.py": "tests/benchmarks/test_bench_isolation.py",
    "tests/test_bench_matrix_smoke.py": "tests/benchmarks/test_bench_matrix_smoke.py",
    "tests/test_bench_rechunk_cli_smoke.py": "tests/benchmarks/test_bench_rechunk_cli_smoke.py",
    "tests/test_bench_rechunk_smoke.py": "tests/benchmarks/test_bench_rechunk_smoke.py",
    "tests/test_bench_s3_smoke.py": "tests/benchmarks/test_bench_s3_smoke.py",
    "tests/test_bench_sharding_smoke.py": "tests/benchmarks/test_bench_sharding_smoke.py",
    "tests/test_bench_xarray_smoke.py": "tests/benchmarks/test_bench_xarray_smoke.py",
    "tests/test_benchmarks_smoke.py": "tests/benchmarks/test_benchmarks_smoke.py",
    "tests/dask/test_bench_cluster_smoke.py": "tests/benchmarks/test_bench_cluster_smoke.py",
    # -- notebooks/ and docker-compose.yml
    "tests/test_notebooks.py": "tests/notebooks/test_notebooks.py",
    "tests/test_cluster_notebook.py": "tests/notebooks/test_cluster_notebook.py",
    "tests/test_docker_compose.py": "tests/deployment/test_docker_compose.py",
}

#: directories of tests ported from zarr-python (their mentions of tests/ are its files)
PORTS = ("zarr_compat", "interop")
#: text files outside tests/ that may name test paths
OTHER_TEXT = ["README.md", "docker-compose.yml", "Dockerfile", "pyproject.toml"]
OTHER_GLOBS = ["docs/**/*.md", "benchmarks/**/*.py", "notebooks/*.ipynb"]


def module(path: str) -> str:
    """tests/io/cache/test_x.py -> tests.io.cache.test_x"""
    return path.removesuffix(".py").replace("/", ".")


def depth(path: str) -> int:
    return path.count("/")


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True)


def ensure_packages(new: str, dry: bool, log: list[str]) -> None:
    """An ``__init__.py`` in every directory from tests/ down to ``new``'s."""
    parts = Path(new).parent.parts
    for i in range(1, len(parts) + 1):
        init = Path(*parts[:i]) / "__init__.py"
        if not init.exists():
            log.append(f"create {init}")
            if not dry:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text("")
                git("add", str(init))


def fix_file_depth(text: str, delta: int) -> str:
    """Paths built from ``__file__``, for a file ``delta`` directories deeper."""
    if delta == 0:
        return text
    text = re.sub(r"(Path\(__file__\)\.resolve\(\)\.parents\[)(\d+)\]",
                  lambda m: f"{m[1]}{int(m[2]) + delta}]", text)
    text = re.sub(r"Path\(__file__\)\.resolve\(\)((?:\.parent(?!s))+)",
                  lambda m: "Path(__file__).resolve()" + ".parent" * (
                      m[1].count(".parent") + delta), text)

    def dirnames(m: re.Match) -> str:
        n = m[1].count("os.path.dirname(") + delta
        return "os.path.dirname(" * n + "os.path.abspath(__file__)" + ")" * n

    pattern = r"((?:os\.path\.dirname\()+)os\.path\.abspath\(__file__\)(\)+)"

    has_path = re.search(r"^from pathlib import .*\bPath\b", text, re.M) is not None

    def balanced(m: re.Match) -> str:  # only the dirname( ... ) pairs, extra ")" kept
        opened = m[1].count("os.path.dirname(")
        extra = ")" * (len(m[2]) - opened)
        if has_path:  # n dirnames of the file = parents[n - 1], on one short line
            return f"str(Path(__file__).resolve().parents[{opened + delta - 1}])" + extra
        return dirnames(m) + extra

    return re.sub(pattern, balanced, text)


def move_relative_imports(text: str, old: str, new: str, modules: dict[str, str]) -> str:
    """``from .x import y`` in a file moved from ``old`` to ``new``: the same module (or
    where it moved) named relative to the new package (``from ..multiproc import``)."""
    old_package = module(old).split(".")[:-1]
    new_package = module(new).split(".")[:-1]
    if old_package == new_package:
        return text

    def moved(m: re.Match) -> str:
        dots, rest = len(m[1]), m[2]
        target = old_package[:len(old_package) - (dots - 1)] + (rest.split(".") if rest else [])
        target = modules.get(".".join(target), ".".join(target)).split(".")
        common = 0
        while (common < min(len(target), len(new_package))
               and target[common] == new_package[common]):
            common += 1
        up = "." * (len(new_package) - common + 1)
        return f"from {up}{'.'.join(target[common:])} import"

    return re.sub(r"^from (\.+)([\w.]*) import", moved, text, flags=re.M)


def rename_modules(text: str, modules: dict[str, str]) -> str:
    """Imports and dotted names of moved test modules."""
    for old, new in sorted(modules.items(), key=lambda kv: -len(kv[0])):
        old_pkg, old_name = old.rsplit(".", 1)
        new_pkg, new_name = new.rsplit(".", 1)
        alias = "" if old_name == new_name else f" as {old_name}"
        # from tests.storage import test_stores [as x]
        text = re.sub(rf"^(\s*)from {re.escape(old_pkg)} import {old_name}\b(?!\.)( as \w+)?",
                      lambda m, np_=new_pkg, nn=new_name, al=alias:
                      f"{m[1]}from {np_} import {nn}{m[2] or al}", text, flags=re.M)
        # tests.test_contract (imports, monkeypatch strings)
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", new, text)
    return text


def rename_paths(text: str, moves: dict[str, str], bare: bool) -> str:
    """Mentions of the old paths; with ``bare``, also bare names of renamed files."""
    for old, new in sorted(moves.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<![\w/]){re.escape(old)}(?![\w])", new, text)
        old_name, new_name = Path(old).name, Path(new).name
        if bare and old_name != new_name:
            text = re.sub(rf"(?<![\w/.]){re.escape(old_name)}(?![\w])", new, text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print, change nothing")
    args = parser.parse_args(argv)
    dry = args.dry_run
    if not Path("chunkstore").is_dir() or not Path("tests/conftest.py").exists():
        sys.exit("run from the repository root")
    log: list[str] = []
    moved: dict[str, str] = {}
    modules = {module(o): module(n) for o, n in MOVES.items()}
    for old, new in MOVES.items():
        if not Path(old).exists():
            log.append(f"skip {old}: " + ("already at " + new if Path(new).exists()
                                          else "missing"))
            continue
        if Path(new).exists():
            sys.exit(f"{new} exists and {old} too: resolve by hand")
        ensure_packages(new, dry, log)
        log.append(f"git mv {old} {new}")
        if not dry:
            git("mv", old, new)
            path = Path(new)
            text = path.read_text()
            fixed = move_relative_imports(fix_file_depth(text, depth(new) - depth(old)),
                                          old, new, modules)
            if fixed != text:
                path.write_text(fixed)
                log.append(f"  fixed __file__ paths / relative imports in {new}")
        moved[old] = new

    # every mapping (also of earlier runs): names in the files are fixed idempotently;
    # not in the ports of zarr-python's suites, whose "tests/..." are zarr-python's files
    texts = [p for p in Path("tests").rglob("*") if p.suffix in (".py", ".sh", ".md")
             and p.parts[1] not in PORTS]
    texts += [Path(p) for p in OTHER_TEXT if Path(p).exists()]
    texts += [p for pattern in OTHER_GLOBS for p in Path().glob(pattern)]
    for path in sorted(set(texts)):
        if path == Path(__file__).resolve().relative_to(Path.cwd().resolve()):
            continue  # this script names every old path on purpose
        text = path.read_text()
        fixed = rename_paths(text, MOVES, bare=str(path).startswith("tests/"))
        if path.suffix == ".py":
            fixed = rename_modules(fixed, modules)
        if fixed != text:
            log.append(f"update references in {path}")
            if not dry:
                path.write_text(fixed)
    for line in log:
        print(line)
    print(f"{len(moved)} moved, {len(MOVES) - len(moved)} skipped" + (" (dry run)" if dry else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
