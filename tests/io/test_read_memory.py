"""A selection's peak extra memory stays within its output + (threads x 2 x chunk) + a
constant, measured as peak RSS in a process of its own (issue 12: ``a[100:103, :]`` across
1,024 chunks of 4 MiB peaked at 1,082 MiB while maps of every chunk were kept)."""

import json
import os

import numpy as np
import pytest

import chunkstore as cs
from tests.code_child import run_code

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"),
                                reason="reads VmHWM from /proc")

MiB = 2**20
THREADS = 2
CONSTANT = 24 * MiB

# VmHWM (this process image's peak RSS; ru_maxrss would keep the forking parent's)
_CHILD = r"""
import json, sys
import chunkstore as cs

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

a = cs.open_array(sys.argv[1], mode="r")
_ = a[0:1, 0:1]  # imports, pool and codecs warmed up
before, peak_before = status("VmRSS"), status("VmHWM")
x = eval(sys.argv[2])
peak, after = status("VmHWM"), status("VmRSS")
print(json.dumps({"extra": peak - before, "peak_before": peak_before - before,
                  "kept": after - before, "out": x.nbytes}))
"""


def _peak(path: str, selection: str, env_threads: int = THREADS) -> dict:
    """The child's report: a process of its own forked from the suite's fork server
    (tests/code_child.py), with the environment of this process at the call."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CHUNKSTORE_THREADS", str(env_threads))
        done = run_code(_CHILD, path, selection)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=[None, "auto"], ids=["raw", "blosc"])
def tall(request, tmp_path_factory):
    """(8192, 4096) f4 in chunks of (8192, 32): 128 chunks of 1 MiB, noise (stays large
    when compressed)."""
    path = str(tmp_path_factory.mktemp("mem") / "a.zarr")
    a = cs.create_array(path, shape=(8192, 4096), chunks=(8192, 32), dtype="f4",
                        compressors=request.param)
    rng = np.random.default_rng(0)
    for i in range(0, 8192, 2048):
        a[i:i + 2048] = rng.random((2048, 4096), dtype="f4")
    return path


def test_rows_across_many_chunks(tall):
    got = _peak(tall, "a[100:103, :]")
    assert got["peak_before"] < 4 * MiB  # the measurement starts from a low water mark
    bound = got["out"] + THREADS * 2 * MiB + CONSTANT
    assert got["extra"] <= bound, {k: v / MiB for k, v in got.items()}
    assert got["kept"] <= CONSTANT  # nothing (no maps) kept after the call


def test_whole_array(tall):
    got = _peak(tall, "a[...]")
    bound = got["out"] + THREADS * 2 * MiB + CONSTANT
    assert got["extra"] <= bound, {k: v / MiB for k, v in got.items()}
