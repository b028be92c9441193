"""docker-compose.yml, checked without Docker: its settings are consistent, and they work
when the services run as processes instead of containers (issue 15, item 2).

The S3 service is replaced by moto's server (the program of the pinned image), the
scheduler and workers by ``dask scheduler`` / ``dask worker`` with the compose commands,
and every process gets the environment compose gives the services, with the service host
names rewritten to 127.0.0.1 and free ports (tests/compose_services.py).
"""

from __future__ import annotations

import re
import tomllib

import numpy as np
import pytest

from tests.compose_services import ROOT, services

pytestmark = pytest.mark.starts_first  # a real cluster or server: see tests/conftest.py

PYTHON_SERVICES = ("create-bucket", "scheduler", "worker", "jupyter")


# -- the file itself ---------------------------------------------------------------------------
def test_images_are_pinned(compose):
    for name, service in services(compose).items():
        image = service["image"]
        if name in PYTHON_SERVICES:
            assert image == services(compose)["create-bucket"]["image"]
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d", tag), image
    s3 = services(compose)["s3"]["image"]
    assert s3.startswith("motoserver/moto:") or s3.startswith("minio/minio:RELEASE.")
    assert sum("build" in s for s in services(compose).values()) == 1


def test_every_python_service_reaches_the_same_s3_and_scheduler(compose):
    svc = services(compose)
    s3_port = int(svc["s3"]["environment"]["MOTO_PORT"])
    assert f"127.0.0.1:{s3_port}:{s3_port}" in svc["s3"]["ports"]
    scheduler_port = svc["scheduler"]["command"][svc["scheduler"]["command"].index("--port") + 1]
    for name in PYTHON_SERVICES:
        env = svc[name]["environment"]
        assert env["AWS_ENDPOINT_URL"] == env["CHUNKSTORE_S3_ENDPOINT"] == f"http://s3:{s3_port}"
        assert env["DASK_SCHEDULER_ADDRESS"] == f"tcp://scheduler:{scheduler_port}"
        assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"]
        assert env["CHUNKSTORE_BUCKET"] == "chunkstore"
    assert f"tcp://scheduler:{scheduler_port}" in svc["worker"]["command"]
    assert svc["worker"]["deploy"]["replicas"] >= 2


def test_start_order_and_healthchecks(compose):
    svc = services(compose)
    for name in ("s3", "scheduler", "worker", "jupyter"):
        assert svc[name]["healthcheck"]["test"][0] == "CMD", name
    assert svc["create-bucket"]["depends_on"] == {"s3": {"condition": "service_healthy"}}
    for name in ("scheduler", "worker", "jupyter"):
        assert svc[name]["depends_on"]["create-bucket"] == {
            "condition": "service_completed_successfully"}, name
    for name in ("worker", "jupyter"):
        assert svc[name]["depends_on"]["scheduler"] == {"condition": "service_healthy"}


def test_jupyter_has_a_token_and_mounted_notebooks(compose):
    jupyter = services(compose)["jupyter"]
    command = " ".join(jupyter["command"])
    assert "NotebookApp" not in command
    assert '--IdentityProvider.token="$$JUPYTER_TOKEN"' in command
    assert jupyter["environment"]["JUPYTER_TOKEN"].startswith("${JUPYTER_TOKEN:?")
    assert "./notebooks:/work/notebooks" in jupyter["volumes"]
    assert "--ServerApp.root_dir=/work/notebooks" in command
    assert all(p.startswith("127.0.0.1:") for s in services(compose).values()
               for p in s.get("ports", []))


def test_image_build():
    dockerfile = (ROOT / "Dockerfile").read_text()
    deps = dockerfile.index('pip install --no-cache-dir ".[cluster]"')
    assert dockerfile.index("COPY pyproject.toml") < deps < dockerfile.index("COPY chunkstore")
    assert "COPY notebooks" not in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".venv", ".git", "**/__pycache__", ".pytest_cache", "data", "notebooks"):
        assert entry in ignored
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cluster = project["optional-dependencies"]["cluster"]
    assert any(d.startswith("bokeh") for d in cluster) and "chunkstore[s3,obstore]" in cluster  # s3:// through obstore
    assert any(d.startswith("google-crc32c") for d in project["dependencies"])
    assert not any(d.startswith("crc32c") for d in project["dependencies"])


# -- the settings at work ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3_service(compose, tmp_path_factory):
    """The S3 service with its bucket (made by the create-bucket service's command), started
    once for the tests below (each writes arrays of its own names); with the scheduler and
    workers of ``cluster`` when a test asks for them, all stopped after the module."""
    from tests.compose_services import services_running
    with services_running(compose, tmp_path_factory.mktemp("compose")) as svc:
        svc.start_s3()
        svc.create_bucket()
        yield svc


@pytest.fixture(scope="module")
def cluster(s3_service):
    """``s3_service`` plus the scheduler and two workers with the compose commands and
    settings, started once for the two cluster tests below (not before: an idle cluster
    costs CPU too)."""
    s3_service.start_cluster()
    s3_service.wait_for_workers(2)
    return s3_service


def test_compose_settings_reach_the_s3_service(s3_service):
    """The bucket service's command (run by ``s3_service``), then the CLI with a worker's
    environment and no storage options, read and write the compose S3 service (not AWS)."""
    import s3fs

    running = s3_service
    bucket = running.env("worker")["CHUNKSTORE_BUCKET"]
    np.save(running.tmp / "x.npy", np.arange(120).reshape(12, 10))
    result = running.chunkstore("convert", "x.npy", f"s3://{bucket}/a.zarr", "--chunks", "4,-1")
    assert result.returncode == 0, result.stderr
    result = running.chunkstore("info", f"s3://{bucket}/a.zarr", env_of="jupyter")
    assert result.returncode == 0, result.stderr
    assert "(12, 10)" in result.stdout and f"s3://{bucket}/a.zarr" in result.stdout
    fs = s3fs.S3FileSystem(**running.s3_storage_options())
    assert fs.exists(f"{bucket}/a.zarr/zarr.json")
    # each of the two endpoint variables compose sets is enough on its own
    for name in ("AWS_ENDPOINT_URL", "CHUNKSTORE_S3_ENDPOINT"):
        result = running.chunkstore("ls", f"s3://{bucket}/a.zarr", drop=name)
        assert result.returncode == 0 and "(12, 10)" in result.stdout, (name, result.stderr)


def test_cluster_started_like_compose_rechunks_on_s3(cluster):
    """``dask scheduler`` and two ``dask worker``s with the compose commands and settings;
    ``chunkstore rechunk`` from S3 to S3 on them (the scheduler address from the
    environment, as in the compose services), with progress lines and a summary."""
    import chunkstore as cs

    running = cluster
    bucket = running.env("worker")["CHUNKSTORE_BUCKET"]
    options = running.s3_storage_options()
    data = np.arange(200 * 300, dtype="f4").reshape(200, 300)
    cs.array(data, store=f"s3://{bucket}/src.zarr", chunks=(20, 300), storage_options=options)
    result = running.chunkstore("rechunk", f"s3://{bucket}/src.zarr", f"s3://{bucket}/dst.zarr",
                                "--chunks", "-1,3", "--max-mem", "100KB", env_of="jupyter")
    assert result.returncode == 0, result.stderr
    scheduler = running.env("jupyter")["DASK_SCHEDULER_ADDRESS"]
    nstages = int(re.search(r"(\d+) stage\(s\)", result.stderr)[1])
    assert re.search(rf"stage {nstages}/{nstages} copy: \d+/\d+ tasks in ", result.stderr), \
        result.stderr
    assert re.search(rf"chunkstore rechunk: rechunked s3://{bucket}/src.zarr -> "
                     rf"s3://{bucket}/dst.zarr \(chunks \(200, 3\)\) on {scheduler} in ",
                     result.stderr)
    out = cs.open_array(f"s3://{bucket}/dst.zarr", mode="r", storage_options=options)
    assert out.chunks == (200, 3)
    np.testing.assert_array_equal(out[:], data)


def test_cluster_started_like_compose_transposes_on_s3_within_the_plan(cluster):
    """The Python API on the CLI-started cluster: a transpose S3 -> S3 planned for those
    workers (facts asked from them), each worker's RSS sampled as dask's nanny sees it
    staying under the plan's own per-worker bound, no pause/spill/restart, exact result."""
    from distributed import Client

    import chunkstore as cs
    import chunkstore.dask as csd
    from chunkstore.dask.memory import WorkerMemory

    running = cluster
    bucket = running.env("worker")["CHUNKSTORE_BUCKET"]
    options = running.s3_storage_options()
    data = np.random.default_rng(0).standard_normal((128, 64, 256), dtype="f4")  # 8 MiB
    src = cs.array(data, store=f"s3://{bucket}/cube.zarr", chunks=(128, 64, 8),
                   storage_options=options)
    with Client(running.env("jupyter")["DASK_SCHEDULER_ADDRESS"], timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        # each worker opens S3 once first: its S3 client (s3fs, aiobotocore: ~30 MB) is
        # part of the baseline the plan measures, as on a worker that has done S3 work
        url = f"s3://{bucket}/cube.zarr"
        client.run(lambda: cs.open_array(url, mode="r", storage_options=options)[0, 0, :1])
        plan = csd.rechunk(csd.TransposedSource(src, (2, 1, 0)), (8, 64, 128),
                           f"s3://{bucket}/cube-t.zarr", max_mem="16MB",
                           storage_options=options)
        desc = plan.describe()
        assert desc["workers"]["measured"] and desc["workers"]["threads_per_worker"] == 1
        with WorkerMemory(client, interval=0.005) as mem:
            plan.execute()
    assert not mem.events, mem.events
    assert len(mem.peaks) == 2
    for addr, peak in mem.peaks.items():
        assert peak <= desc["peak_worker_memory"] + 12 * 2**20, (addr, peak / 2**20,
                                                                 desc["peak_worker_memory"])
        assert peak <= 16e6 + 200e6  # max_mem + 200 MB
    out = cs.open_array(f"s3://{bucket}/cube-t.zarr", mode="r", storage_options=options)
    assert out.chunks == (8, 64, 128)
    np.testing.assert_array_equal(out[:], np.transpose(data, (2, 1, 0)))
