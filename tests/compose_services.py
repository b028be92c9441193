"""docker-compose.yml's services as processes on 127.0.0.1 (no Docker): the S3 service is
moto's server (the program of the pinned image), the scheduler and workers are ``dask
scheduler`` / ``dask worker`` with the compose commands, and every process gets the
environment compose gives its service, with the service host names rewritten to 127.0.0.1
and free ports. Used by tests/deployment/test_docker_compose.py and tests/notebooks/test_cluster_notebook.py.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from benchmarks.processes import free_port, stop_in_order

ROOT = Path(__file__).resolve().parents[1]


def load_compose() -> dict:
    """docker-compose.yml, parsed."""
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def services(compose: dict) -> dict:
    """The ``services`` section of the compose file."""
    return compose["services"]


class Services:
    """The compose services as processes on 127.0.0.1 (started in order, stopped at exit)."""

    def __init__(self, compose: dict, tmp_path: Path) -> None:
        self.svc = services(compose)
        self.tmp = tmp_path
        self.ports = {"s3": free_port(), "scheduler": free_port()}
        self.procs: list[subprocess.Popen] = []
        self.service_of: dict[int, str] = {}  # pid -> service name

    def rewrite(self, text: str) -> str:
        """Service addresses -> 127.0.0.1 and this run's ports."""
        s3_port = self.svc["s3"]["environment"]["MOTO_PORT"]
        scheduler_port = self.scheduler_command()[1]
        return (text.replace(f"s3:{s3_port}", f"127.0.0.1:{self.ports['s3']}")
                .replace(f"localhost:{s3_port}", f"127.0.0.1:{self.ports['s3']}")
                .replace(f"scheduler:{scheduler_port}", f"127.0.0.1:{self.ports['scheduler']}"))

    def scheduler_command(self) -> tuple[list[str], str]:
        command = self.svc["scheduler"]["command"]
        return command, command[command.index("--port") + 1]

    def env(self, name: str) -> dict[str, str]:
        """What compose gives the service ``name``, rewritten; no other AWS settings."""
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("AWS_", "CHUNKSTORE_", "DASK_"))}
        base.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        own = self.svc[name].get("environment", {})
        return {**base, **{k: self.rewrite(str(v)) for k, v in own.items()}}

    def start(self, name: str, argv: list[str], log: str) -> subprocess.Popen:
        out = open(self.tmp / f"{log}.log", "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(argv, env=self.env(name), stdout=out, stderr=subprocess.STDOUT,
                                cwd=self.tmp)
        self.service_of[proc.pid] = name
        self.procs.append(proc)
        return proc

    def healthcheck(self, name: str, replace: dict[str, str], timeout: float = 60) -> None:
        """Run the compose healthcheck of ``name`` until it passes."""
        argv = [self.rewrite(a) for a in self.svc[name]["healthcheck"]["test"][1:]]
        for old, new in replace.items():
            argv = [a.replace(old, new) for a in argv]
        argv = [sys.executable if a == "python" else a for a in argv]
        deadline = time.monotonic() + timeout
        while subprocess.run(argv, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, f"{name} is not healthy: {argv}"
            time.sleep(0.3)

    def start_s3(self) -> None:
        self.start("s3", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                          str(self.ports["s3"])], "s3")
        self.healthcheck("s3", {})

    def create_bucket(self) -> None:
        command = [sys.executable if a == "python" else a
                   for a in self.svc["create-bucket"]["command"]]
        result = subprocess.run(command, env=self.env("create-bucket"), capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0 and "ready" in result.stdout, result.stderr

    def start_cluster(self, workers: int = 2, memory_limit: str = "1GiB") -> None:
        """The scheduler (healthy), then ``workers`` workers with the compose command,
        one thread and ``memory_limit`` each (not waited for: see ``wait_for_workers``)."""
        command, port = self.scheduler_command()
        dashboard = free_port()
        argv = [a.replace(port, str(self.ports["scheduler"])).replace(":8787", f":{dashboard}")
                for a in command[1:]]
        self.start("scheduler", [sys.executable, "-m", "dask", *argv, "--host", "127.0.0.1"],
                   "scheduler")
        self.healthcheck("scheduler", {"localhost:8787": f"127.0.0.1:{dashboard}"})
        worker = [self.rewrite(a) for a in self.svc["worker"]["command"][1:]]
        worker = [a for a in worker if a != ":8789"]
        worker.remove("--dashboard-address")
        worker[worker.index("--memory-limit") + 1] = memory_limit
        worker[worker.index("--nthreads") + 1] = "1"
        for i in range(workers):
            self.start("worker", [sys.executable, "-m", "dask", *worker, "--host", "127.0.0.1",
                                  "--no-dashboard"], f"worker-{i}")

    def wait_for_workers(self, n: int = 2, timeout: float = 60) -> None:
        """Until ``n`` workers are connected to the scheduler."""
        from distributed import Client
        with Client(self.env("worker")["DASK_SCHEDULER_ADDRESS"], timeout=30) as client:
            client.wait_for_workers(n, timeout=timeout)

    def logs(self, prefix: str) -> str:
        """The output so far of the processes whose log names start with ``prefix``."""
        return "".join(p.read_text() for p in sorted(self.tmp.glob(f"{prefix}*.log")))

    def stop(self) -> None:
        """Stop the processes in reverse start order: the workers together first, while
        the scheduler still answers (a worker whose scheduler is gone waits 8 s for it
        before its nanny kills it), then the scheduler, then S3."""
        workers = [p for p in self.procs if self.service_of[p.pid] == "worker"]
        stop_in_order(workers, [p for p in reversed(self.procs) if p not in workers], timeout=20)

    def chunkstore(self, *argv: str, env_of: str = "worker", drop: str | None = None
                   ) -> subprocess.CompletedProcess:
        """The CLI with the environment compose gives ``env_of`` (without ``drop``)."""
        env = {k: v for k, v in self.env(env_of).items() if k != drop}
        return subprocess.run([sys.executable, "-m", "chunkstore", *argv], env=env,
                              capture_output=True, text=True, cwd=self.tmp, timeout=120)

    def s3_storage_options(self) -> dict:
        """Explicit options for the test's own checks (independent of the environment)."""
        env = self.env("worker")
        return {"key": env["AWS_ACCESS_KEY_ID"], "secret": env["AWS_SECRET_ACCESS_KEY"],
                "client_kwargs": {"endpoint_url": env["AWS_ENDPOINT_URL"]}}


@contextlib.contextmanager
def services_running(compose: dict, tmp_path: Path) -> Iterator[Services]:
    """A :class:`Services` (nothing started yet) whose processes are stopped at exit;
    skips without moto's server or s3fs."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    svc = Services(compose, tmp_path)
    try:
        yield svc
    finally:
        svc.stop()
