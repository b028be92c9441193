#!/usr/bin/env bash
# The interop suites again on the newest Python and the newest zarr-python (which needs
# Python >= 3.12): tests/interop and tests/zarr_compat are written once and run against
# whichever zarr is installed, so this run checks zarr 3.4+ where the main run (Python
# 3.11) checks the newest zarr for 3.11. Then an import-and-round-trip smoke test on
# Python 3.13. A missing interpreter is reported on one line and skipped, never silent.
# Both environments are installed at once (the installs wait on the network and disk).
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {  # $1 = "3.12": an interpreter of that version, or nothing
    local want=$1 cand
    for cand in "python$want" "$(pyenv root 2>/dev/null)/versions/$want"*/bin/python"$want" \
                /usr/bin/python"$want" /usr/local/bin/python"$want"; do
        if [ -x "$(command -v "$cand" 2>/dev/null || true)" ] \
           && "$cand" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$want'.split('.')))" \
              2>/dev/null; then
            command -v "$cand"
            return
        fi
    done
}

py312=$(find_python 3.12 || true)
py313=$(find_python 3.13 || true)
pids=()
if [ -n "$py312" ]; then
    ("$py312" -m venv .venv312 && .venv312/bin/pip install -q -e ".[interop]") &
    pids+=($!)
fi
if [ -n "$py313" ]; then
    ("$py313" -m venv .venv313 && .venv313/bin/pip install -q -e . "pytest>=8" "pytest-timeout>=2.3") &
    pids+=($!)
fi
for pid in "${pids[@]}"; do
    wait "$pid"
done

if [ -z "$py312" ]; then
    echo "newest_zarr.sh: no Python 3.12 on this machine: interop with the newest zarr-python NOT run"
else
    .venv312/bin/python -c "import sys, zarr; print('interop on Python', sys.version.split()[0], 'with zarr', zarr.__version__)"
    .venv312/bin/python -m pytest -q -n 2 -p no:cacheprovider tests/interop tests/zarr_compat
fi
if [ -z "$py313" ]; then
    echo "newest_zarr.sh: no Python 3.13 on this machine: the 3.13 smoke test NOT run"
else
    .venv313/bin/python -m pytest -q -p no:cacheprovider tests/test_python_versions.py
fi
