#!/usr/bin/env bash
# Creates the project's Python 3.11 environment in .venv from the checked-in lock
# (requirements.lock) and installs the project itself in editable mode.
# Idempotent: does nothing when .venv already matches the lock and pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
stamp=.venv/.installed
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)-uv$UV_VERSION-bytecode

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
  exit 0
fi

py=""
for candidate in python3.11 /usr/bin/python3.11; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    py=$candidate; break
  fi
done
if [ -z "$py" ]; then
  echo "install_python: Python 3.11 not found (scripts/install_system.sh installs it from Debian's packages)" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  rm -rf .venv
  "$py" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
# `sync` makes the environment exactly the lock: it also removes what the lock dropped.
# `--compile-bytecode` writes every module's bytecode now: uv leaves it to the first import,
# and where PYTHONDONTWRITEBYTECODE is set (this machine and CI) no import ever writes it,
# so every process compiled what it imported again. The Parquet log's landing thread spent
# 1.4 s of a streamer's first seconds compiling pyarrow's and pandas's modules; any
# process importing them (tests, Spark workers, Airflow tasks) paid the same.
.venv/bin/uv pip sync -q --compile-bytecode --python .venv/bin/python requirements.lock
.venv/bin/uv pip install -q --python .venv/bin/python --no-deps -e .
echo "$want" > "$stamp"
echo "install_python: .venv ready ($(.venv/bin/python --version))"
