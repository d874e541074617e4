"""Shared fixtures: the repository's paths and the `switchyard` command, whose output the
bindings are compared with (the same library calls must give the same numbers)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `switchyard` command built from this repository (`SWITCHYARD_BIN`, else
    `target/debug/switchyard`). Missing, the tests that compare with it fail: `python/ci.sh`
    builds it first."""
    path = Path(os.environ.get("SWITCHYARD_BIN", REPO / "target" / "debug" / "switchyard"))
    if not path.is_file():
        pytest.fail(
            f"the switchyard command is not at {path}: build it with `cargo build -p switchyard`"
            " or set SWITCHYARD_BIN"
        )
    return path


def run_cli(cli: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(cli), *args], capture_output=True, text=True, timeout=600, check=False
    )
