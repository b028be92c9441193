"""The S3 benchmark closes the aiohttp sessions its fsspec users open (chunkstore's fsspec
backend, zarr-python): a run ends without "Unclosed client session / connector" and
without a session closed on another thread's event loop ("Task exception was never
retrieved ... attached to a different loop")."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pytest.importorskip("zarr")

ROOT = Path(__file__).resolve().parents[2]

# each library writes and reads an array as in the benchmark, then its sessions are
# closed as the benchmark does between methods; the filesystems are then collected while
# zarr-python's event loop runs (what made the warnings: s3fs's finalizer closing a
# session on whatever loop runs in the collecting thread), and at exit
SCRIPT = textwrap.dedent("""
    import gc, sys
    import numpy as np
    from zarr.core.sync import sync
    from benchmarks.s3_endpoint import close_s3fs
    from benchmarks.s3_peers import ChunkstoreFsspec, ZarrPython

    endpoint, bucket = sys.argv[1], sys.argv[2]
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint}}
    data = np.arange(64, dtype="f4").reshape(8, 8)

    async def collect():
        gc.collect()

    for cls in (ChunkstoreFsspec, ZarrPython):
        peer = cls(endpoint, bucket, options, 2)
        peer.create_and_write(data, (4, 4))
        assert np.array_equal(np.asarray(peer.read_all(peer.open())), data)
        close_s3fs(peer.run_async)
        del peer
        sync(collect())
    gc.collect()
    print("done")
""")


def test_no_unclosed_sessions(s3_bucket, s3_endpoint, tmp_path):
    url, _ = s3_bucket
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, s3_endpoint, url.removeprefix("s3://")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr
    for text in ("Unclosed client session", "Unclosed connector", "Task exception",
                 "different loop"):
        assert text not in run.stderr, run.stderr
