#!/usr/bin/env bash
# CI for the Python package: a fresh virtual environment with maturin, pytest, pandas and
# the notebook runner from PyPI; the wheel built from this repository (the dev profile,
# opt-level 1 for the simulator's crates and 2 for the rest, as the workspace's); then
# the `ray` extra; then pytest, which also executes the example notebooks and runs a sweep on
# a Ray cluster of two nodes started on 127.0.0.1. Any missing piece fails: nothing here is
# optional or skipped.
# Cost: the wheel compiles the simulator once more (nothing is shared with `cargo test
# --workspace`: features resolve differently), about 9 CPU-minutes; Ray's wheel and its
# dependencies download in about 12 s; the tests take under a minute (the Ray ones about 16 s
# of it, the cluster's start and stop included).
set -euo pipefail
cd "$(dirname "$0")"
# Ray and pyarrow are large wheels: do not keep a second copy of them in pip's cache.
export PIP_NO_CACHE_DIR=1
ROOT="$(cd .. && pwd)"
VENV="${SWITCHYARD_PY_VENV:-$ROOT/target/python-ci-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "maturin>=1.5,<2" pytest "pandas>=1.5" pyarrow nbclient nbformat ipykernel

# The command the tests compare the bindings with: `cargo test --workspace` (before this in
# .ci/run) built it for its integration tests; building it with `cargo build` would resolve
# features differently and compile the whole simulator once more.
export SWITCHYARD_BIN="${SWITCHYARD_BIN:-$CARGO_TARGET_DIR/debug/switchyard}"
if [ ! -x "$SWITCHYARD_BIN" ]; then
  cargo test --locked -p switchyard --no-run --manifest-path "$ROOT/Cargo.toml"
fi

rm -rf "$CARGO_TARGET_DIR/wheels-ci"
"$VENV/bin/maturin" build --locked --profile dev --out "$CARGO_TARGET_DIR/wheels-ci"
WHEEL="$(ls "$CARGO_TARGET_DIR"/wheels-ci/switchyard-*.whl)"
"$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"
# The `ray` extra (pyproject.toml), as a user installs it: tests/test_ray.py starts a Ray
# cluster on 127.0.0.1 and fails without it.
"$VENV/bin/python" -m pip install --quiet "$WHEEL[ray]"

# From the tests' folder, so `import switchyard` is the installed wheel, not the source.
cd tests
"$VENV/bin/python" -m pytest -q -p no:cacheprovider .
