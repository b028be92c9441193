"""No Docker engine runs here: check the compose file's services, ports and settings."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_ports():
    services = load()["services"]
    assert {"scheduler", "worker", "minio", "jupyter"} <= set(services)
    assert "8786:8786" in services["scheduler"]["ports"]
    assert "8787:8787" in services["scheduler"]["ports"]
    assert "9000:9000" in services["minio"]["ports"]
    assert "8888:8888" in services["jupyter"]["ports"]
    assert services["worker"]["deploy"]["replicas"] >= 2
    assert "tcp://scheduler:8786" in services["worker"]["command"]


def test_shared_settings_reach_every_chunkstore_service():
    services = load()["services"]
    for name in ("scheduler", "worker", "jupyter"):
        env = services[name]["environment"]
        assert env["CHUNKSTORE_S3_ENDPOINT"] == "http://minio:9000"
        assert env["DASK_SCHEDULER_ADDRESS"] == "tcp://scheduler:8786"
        assert env["AWS_ACCESS_KEY_ID"] == services["minio"]["environment"]["MINIO_ROOT_USER"]
        assert env["AWS_SECRET_ACCESS_KEY"] == \
            services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
    images = {services[n].get("image") for n in ("scheduler", "worker", "jupyter")}
    assert images == {"chunkstore:latest"}
    assert services["scheduler"]["build"] == "."


def test_dockerfile_installs_this_repo():
    text = (ROOT / "Dockerfile").read_text()
    assert "COPY chunkstore" in text and 'pip install --no-cache-dir ".[s3]"' in text
