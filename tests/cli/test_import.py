"""Issue 15, item 6: ``import chunkstore`` (and the command) print no DeprecationWarning,
such as numcodecs' "crc32c usage is deprecated" (chunkstore depends on google-crc32c)."""

from __future__ import annotations

import subprocess
import sys


def test_import_prints_no_deprecation_warning():
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                             "import chunkstore, chunkstore.cli, numcodecs.checksum32"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_version_prints_no_warning():
    result = subprocess.run([sys.executable, "-m", "chunkstore", "--version"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("chunkstore ")
