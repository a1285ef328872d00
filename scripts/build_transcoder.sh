#!/usr/bin/env bash
# Builds the MongoDB transcoder (cdc_core/connectors/mongodb/transcoder: Rust with pyo3,
# crates from crates.io pinned by its Cargo.lock) into .venv with maturin.
# Idempotent: does nothing when its sources and the environment are what it was built from.
set -euo pipefail
cd "$(dirname "$0")/.."

crate=cdc_core/connectors/mongodb/transcoder
stamp=.venv/.transcoder
want=$(cat "$crate"/Cargo.toml "$crate"/Cargo.lock "$crate"/pyproject.toml "$crate"/src/*.rs .venv/.installed | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
   .venv/bin/python -c 'import tidemark_mongodb_transcoder' 2>/dev/null; then
  exit 0
fi
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "build_transcoder: cargo not found; install Rust (rustup) to build the MongoDB transcoder" >&2
  exit 1
fi
.venv/bin/uv pip install -q --python .venv/bin/python --no-deps --reinstall "./$crate"
echo "$want" > "$stamp"
echo "build_transcoder: the MongoDB transcoder is built"
