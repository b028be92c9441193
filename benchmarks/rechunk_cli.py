"""chunkstore's rechunk and transpose on a cluster started as users start one (issue 13):
``dask scheduler`` and two ``dask worker`` processes from the dask CLI (TCP on 127.0.0.1,
1 thread each, ``--memory-limit = max_mem + 500 MB``, no dashboard) and moto's S3 server
as its own process (``python -m moto.server``, objects over 64 KiB kept in files, as in
docker-compose.yml), the arrays read from and written to S3 through the Python API
(``chunkstore.dask``) with ``Client("tcp://...")``.

The row is measured as the LocalCluster rows are (``rechunk_measure.run_on_cluster``:
each worker's RSS sampled by pid every 0.1 s, wall and worker CPU time, the plan's
per-worker prediction); the memory events are taken from the worker processes' own
output (worker and nanny, restarts included), and the S3 server's CPU seconds are
recorded beside the workers'. Every process is terminated when the run ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from benchmarks.processes import free_port, stop_in_order
from benchmarks.rechunk_measure import HEADROOM, MB, check, run_on_cluster

METHOD = "chunkstore-cli-s3"
BUCKET = "bench-rechunk"
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
       "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


class CliCluster:
    """moto's S3 server (with a bucket), ``dask scheduler`` and ``workers`` x ``dask
    worker`` as processes on 127.0.0.1 for the length of a ``with`` block; ``client`` is
    connected to the scheduler, ``storage_options`` reach the S3 server."""

    def __init__(self, workdir: Path, memory_limit: int, workers: int = 2) -> None:
        self.workdir, self.memory_limit, self.nworkers = Path(workdir), memory_limit, workers
        self.logs = self.workdir / "cli-logs"
        self.s3_port, self.scheduler_port = free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{self.s3_port}"
        self.address = f"tcp://127.0.0.1:{self.scheduler_port}"
        self.storage_options = {"key": AWS["AWS_ACCESS_KEY_ID"],
                                "secret": AWS["AWS_SECRET_ACCESS_KEY"],
                                "client_kwargs": {"endpoint_url": self.endpoint}}
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.client: Any = None

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "DASK_", "MOTO_"))}
        return {**env, **AWS, "AWS_ENDPOINT_URL": self.endpoint}

    def _start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen:
        out = open(self.logs / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(argv, env={**self._env(), **env}, stdout=out,
                                stderr=subprocess.STDOUT, cwd=self.workdir)
        out.close()  # the child has its own descriptor
        self.procs.append((name, proc))
        return proc

    def __enter__(self) -> CliCluster:
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            self._start_all()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start_all(self) -> None:
        import s3fs
        from distributed import Client
        moto_tmp = self.workdir / "moto-tmp"
        moto_tmp.mkdir(exist_ok=True)
        moto = self._start("s3", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                  "-p", str(self.s3_port)],
                           MOTO_S3_DEFAULT_KEY_BUFFER_SIZE="65536", TMPDIR=str(moto_tmp))
        self._wait_for(lambda: urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=3),
                       moto, "the S3 server")
        self.fs = s3fs.S3FileSystem(**self.storage_options)
        self.fs.mkdir(BUCKET)
        self._start("scheduler", [sys.executable, "-m", "dask", "scheduler", "--host",
                                  "127.0.0.1", "--port", str(self.scheduler_port),
                                  "--no-dashboard"])
        for i in range(self.nworkers):
            self._start(f"worker-{i}", [
                sys.executable, "-m", "dask", "worker", self.address, "--host", "127.0.0.1",
                "--nthreads", "1", "--memory-limit", str(self.memory_limit), "--no-dashboard",
                "--local-directory", str(self.workdir / "dask-workers")])
        self.client = Client(self.address, timeout=60)
        self.client.wait_for_workers(self.nworkers, timeout=120)

    @staticmethod
    def _wait_for(probe: Any, proc: subprocess.Popen, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                probe()
                return
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{what} did not start") from None
                time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        """Close the client; terminate the workers (their nannies close them while the
        scheduler still answers), then the scheduler, then S3; kill what is left."""
        if self.client is not None:
            self.client.close()
        family = []
        for _, proc in self.procs:
            try:
                family += psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                pass
        stop_in_order([p for name, p in self.procs if name.startswith("worker")],
                      [p for name, p in reversed(self.procs) if not name.startswith("worker")])
        for child in family:  # e.g. a worker process whose nanny was killed
            try:
                child.kill()
            except psutil.Error:
                pass

    def s3_cpu_seconds(self) -> float:
        """User + system CPU seconds of the S3 server so far."""
        proc = dict(self.procs)["s3"]
        times = psutil.Process(proc.pid).cpu_times()
        return times.user + times.system

    def memory_events(self) -> list[str]:
        """Memory lines (pause, spill, restart, ...) the workers and their nannies wrote."""
        from chunkstore.dask.memory import MEMORY_EVENTS
        events = []
        for path in sorted(self.logs.glob("worker-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if any(word in line.lower() for word in MEMORY_EVENTS):
                    events.append(f"{path.stem}: {line[:300]}")
        return events


def upload(fs: Any, src: Path, prefix: str, batch: int = 256 * 10**6) -> None:
    """The files under ``src`` to ``prefix`` on ``fs``, in batches of at most ``batch``
    bytes (s3fs's recursive ``put`` left this process 2x the bytes uploaded larger)."""
    group: dict[str, bytes] = {}
    size = 0
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        if group and size + path.stat().st_size > batch:
            fs.pipe(group)
            group, size = {}, 0
        data = path.read_bytes()
        group[f"{prefix}/{path.relative_to(src).as_posix()}"] = data
        size += len(data)
    if group:
        fs.pipe(group)


def run_cli(case: str, src: Path, target: tuple, axes: tuple[int, ...] | None, max_mem: int,
            workdir: Path, cli: CliCluster | None = None) -> dict:
    """chunkstore's rechunk (or transpose, with ``axes``) of the local source ``src``,
    copied to S3 first (untimed), S3 -> S3 on a fresh :class:`CliCluster` (or ``cli``,
    running: the smoke runs' one cluster for every case); the row has the result checked
    against ``src`` and the bytes stored on S3."""
    if cli is None:
        with CliCluster(workdir, memory_limit=max_mem + HEADROOM) as fresh:
            # the S3 server kept its objects in unlinked files: gone with it
            return _run_on(fresh, case, src, target, axes, max_mem)
    return _run_on(cli, case, src, target, axes, max_mem)


def _run_on(cli: CliCluster, case: str, src: Path, target: tuple,
            axes: tuple[int, ...] | None, max_mem: int) -> dict:
    """``run_cli``'s row on the running ``cli``."""
    import chunkstore as cs
    from benchmarks.bench_rechunk import chunkstore_rechunk  # (it imports this module)
    options = cli.storage_options
    src_url, dst_url = f"s3://{BUCKET}/{case}-src.zarr", f"s3://{BUCKET}/{case}-dst.zarr"
    upload(cli.fs, src, src_url.removeprefix("s3://"))
    # each worker opens the array on S3 once first (its metadata, no chunk): its S3
    # client is part of the baseline the plan measures, as on a worker that has done
    # S3 work
    cli.client.run(lambda: cs.open_array(src_url, mode="r", storage_options=options).shape)
    s3_cpu0 = cli.s3_cpu_seconds()
    row = run_on_cluster(lambda: chunkstore_rechunk(src_url, dst_url, target, max_mem, axes,
                                                    storage_options=options),
                         max_mem, client=cli.client)
    row["s3_cpu_s"] = cli.s3_cpu_seconds() - s3_cpu0
    row["memory_events"] = cli.memory_events()
    row["memory_limit_mb"] = cli.memory_limit / MB
    row["scheduler"] = cli.address
    if "error" not in row:
        row["correct"] = check(src, dst_url, axes, storage_options=options)
        row["target_stored_mb"] = cli.fs.du(dst_url.removeprefix("s3://")) / MB
    return row
