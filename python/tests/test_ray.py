"""The Ray backend of `switchyard.sweep` (issue 28 item 4) on a real Ray cluster started here
on 127.0.0.1: a head and one more worker node, one CPU each. A sweep's Ray worker process is
SIGKILLed while it runs a point; the sweep still completes, every point has exactly one row,
the rows are a local sweep's, and a second Ray run computes nothing. `switchyard sweep --ray`
runs the same backend from the command.

Ray is an optional extra of the package, but not of CI: without it these tests fail (they are
never skipped). `python/ci.sh` installs it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import switchyard as sy
from switchyard import _native

from conftest import run_cli

KERNELS = ["gemm", "dct8", "hist", "reduce", "scan", "hotspot", "pathfinder", "kmeans"]
# 16 points: at two at a time, the kill (after the second point is recorded) lands with most
# of the sweep still to run.
SWEEP = {"fixed": {"size": "small", "gpu": "gtx480"}, "grid": {"kernel": KERNELS, "seed": [1, 2]}}


def _ray_command() -> Path:
    """The `ray` command of this interpreter's environment; Ray missing fails the test."""
    try:
        import ray  # noqa: F401
    except ImportError as e:
        pytest.fail(
            f"Ray is not installed ({e}): the Ray backend's tests cannot run. Install the extra "
            "(pip install './python[ray]'); python/ci.sh does."
        )
    path = Path(sys.executable).parent / "ray"
    if not path.is_file():
        pytest.fail(f"Ray is installed but its command is not at {path}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A Ray cluster on 127.0.0.1 (a head and a worker node, one CPU each, small object
    stores); its address. Always stopped afterwards, and only it (`_stop`)."""
    ray = _ray_command()
    port = _free_port()
    # Ray's socket paths must stay short: a folder of its own directly under /tmp.
    temp = tempfile.mkdtemp(prefix="syray-", dir="/tmp")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--num-cpus", "1", "--object-store-memory", "100000000", "--disable-usage-stats"]
    address = f"127.0.0.1:{port}"

    def start(*args: str) -> None:
        out = subprocess.run(
            [str(ray), "start", *args, *common],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )
        assert out.returncode == 0, f"ray start {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"

    try:
        start("--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
              "--temp-dir", temp, "--include-dashboard", "false")
        start("--address", address, "--node-ip-address", "127.0.0.1")
        yield address
    finally:
        _stop(temp)
        shutil.rmtree(temp, ignore_errors=True)


def _processes_of(temp: str) -> List[int]:
    """The processes of the cluster whose folder is `temp`: those whose command line names
    it (its GCS, raylets, monitors) and all their descendants (agents and workers, which
    rename themselves `ray::...`). Not this process."""
    parent: Dict[int, int] = {}
    mine = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        pid = int(entry)
        # The parent is the second field after the command name, which may hold spaces.
        parent[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        if temp.encode() in cmdline:
            mine.add(pid)
    while True:
        more = {p for p, pp in parent.items() if pp in mine and p not in mine}
        if not more:
            break
        mine |= more
    mine.discard(os.getpid())
    return sorted(mine)


def _stop(temp: str) -> None:
    """Stops this cluster alone (`ray stop` would stop every Ray cluster of the user):
    SIGTERM, then SIGKILL for what is left after 10 s."""
    for sig, wait in [(signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)]:
        for pid in _processes_of(temp):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while _processes_of(temp) and time.monotonic() < deadline:
            time.sleep(0.2)
    left = _processes_of(temp)
    assert not left, f"Ray processes of {temp} still running: {left}"


def _running_points() -> List[int]:
    """The process ids of Ray workers running one of our tasks (Ray titles a worker
    `ray::<function>` while it runs a task, `ray::IDLE` between tasks)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(b"ray::run_point"):
            pids.append(int(d.name))
    return pids


def _rows(db: Path, sql: str) -> list:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


class Killer(threading.Thread):
    """SIGKILLs one Ray worker running a point, once `after` points have rows in `db`."""

    def __init__(self, db: Path, after: int) -> None:
        super().__init__(daemon=True)
        self.db, self.after = db, after
        self.killed: Optional[int] = None
        self.rows_then: Optional[int] = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            try:
                n = _rows(self.db, "SELECT COUNT(*) FROM points")[0][0]
            except sqlite3.Error:
                continue  # not created yet
            if n < self.after:
                continue
            pids = _running_points()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                self.killed, self.rows_then = pids[0], n
                return


COLUMNS = "key, point, params, status, error, verified, cycles, warp_instructions, launches, result"


def test_a_ray_sweep_survives_a_killed_worker_and_matches_a_local_one(cluster, tmp_path):
    total = len(KERNELS) * 2
    db = tmp_path / "ray.db"
    killer = Killer(db, after=2)
    killer.start()
    t = time.monotonic()
    try:
        df = sy.sweep(database=db, backend="ray", ray_address=cluster, **SWEEP)
    finally:
        killer.stop.set()
        killer.join()
    ray_s = time.monotonic() - t
    assert killer.killed is not None, "no worker was running a point to kill"
    assert killer.rows_then < total, "the kill landed after the sweep"
    # The sweep completed: every point, once, verified.
    s = df.attrs["summary"]
    assert (s["points"], s["computed"], s["failed"], s["reused"]) == (total, total, 0, 0), s
    assert list(df.status) == ["ok"] * total
    assert _rows(db, "SELECT COUNT(*), COUNT(DISTINCT key) FROM points") == [(total, total)]
    assert _rows(db, "SELECT COUNT(*) FROM computations") == [(total,)]
    # The same rows as the local backend's (the run and the times aside).
    local = tmp_path / "local.db"
    t = time.monotonic()
    sy.sweep(database=local, jobs=2, **SWEEP)
    local_s = time.monotonic() - t
    sql = f"SELECT {COLUMNS} FROM points ORDER BY point"
    assert _rows(db, sql) == _rows(local, sql)
    # Again on Ray: nothing computed, nothing written.
    again = sy.sweep(database=db, backend="ray", ray_address=cluster, **SWEEP)
    assert again.attrs["summary"]["computed"] == 0
    assert list(again.key) == list(df.key)
    assert _rows(db, "SELECT COUNT(*) FROM computations") == [(total,)]
    print(f"\nray: {total} points in {ray_s:.1f} s with one worker killed; local --jobs 2: {local_s:.1f} s")


def test_the_command_runs_a_sweep_on_ray(cluster, cli, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[fixed]\nsize = "small"\n[grid]\nkernel = ["reduce", "scan"]\nseed = [1, 2]\n')
    env = dict(os.environ, SWITCHYARD_PYTHON=sys.executable)
    db = tmp_path / "s.db"
    out = subprocess.run(
        [str(cli), "sweep", str(f), "--db", str(db), "--ray", cluster, "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["points"], summary["computed"], summary["failed"]) == (4, 4, 0)
    # The rows a local sweep of the same file writes.
    local = tmp_path / "local.db"
    assert run_cli(cli, "sweep", str(f), "--db", str(local)).returncode == 0
    sql = f"SELECT {COLUMNS} FROM points ORDER BY point"
    assert _rows(db, sql) == _rows(local, sql)


def test_the_command_says_what_ray_needs(cli, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[fixed]\nkernel = "reduce"\n')
    env = dict(os.environ, SWITCHYARD_PYTHON=str(tmp_path / "no-python"))
    out = subprocess.run(
        [str(cli), "sweep", str(f), "--ray", "127.0.0.1:1"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert out.returncode != 0
    assert "pip install ./python[ray]" in out.stderr and "could not start" in out.stderr, out.stderr
    assert "panicked" not in out.stderr
    out = run_cli(cli, "sweep", str(f), "--ray", "127.0.0.1:1", "--jobs", "2")
    assert out.returncode != 0 and "--jobs" in out.stderr, out.stderr


def test_without_ray_the_backend_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(sy.SwitchyardValueError, match=r"pip install 'switchyard\[ray\]'"):
        sy.sweep(database=tmp_path / "s.db", backend="ray", grid={"kernel": ["reduce"]})
    with pytest.raises(sy.SwitchyardValueError, match="'local' or 'ray'"):
        sy.sweep(database=tmp_path / "s.db", backend="dask", grid={"kernel": ["reduce"]})


def test_a_result_recorded_twice_is_one_row(tmp_path):
    """What the driver does when Ray delivers a point's result twice (a task retried after
    its first attempt finished): the second record writes nothing."""
    text = sy.sweep_toml(grid={"kernel": ["reduce", "scan"]})
    db = tmp_path / "s.db"
    driver = _native.sweep_start("<sweep>", str(db), text)
    pending = json.loads(driver.pending())
    assert [p["index"] for p in pending] == [0, 1]
    results: Dict[int, str] = {
        p["index"]: _native.sweep_point("<sweep>", driver.text, driver.dir, p["index"]) for p in pending
    }
    assert json.loads(results[1])["key"] == pending[1]["key"]
    assert driver.record(1, results[1]) is True
    assert driver.record(1, results[1]) is False
    assert driver.record(0, results[0]) is True
    summary = json.loads(driver.summary())
    assert (summary["computed"], summary["duplicates"]) == (2, 1)
    assert _rows(db, "SELECT COUNT(*) FROM points") == [(2,)]
    assert _rows(db, "SELECT COUNT(*) FROM computations") == [(2,)]
    with pytest.raises(sy.SwitchyardValueError, match="not a point's result"):
        driver.record(0, "{}")
    with pytest.raises(sy.SwitchyardValueError, match="the sweep has 2 points"):
        _native.sweep_point("<sweep>", driver.text, driver.dir, 2)


def test_a_worker_finds_a_scenario_sweeps_files_from_another_folder(repo, tmp_path, monkeypatch):
    """A Ray worker's current folder is not the driver's: the driver sends the sweep's folder
    made absolute, and the worker's point has the driver's key."""
    here = tmp_path / "sweep"
    here.mkdir()
    shutil.copy(repo / "crates/sweep/tests/data/one.toml", here / "one.toml")
    shutil.copy(repo / "examples/saxpy/saxpy.ptx", here / "saxpy.ptx")
    (here / "s.toml").write_text('[fixed]\nscenario = "one.toml"\n[grid]\npolicy = ["fcfs", "npq"]\n')
    monkeypatch.chdir(here)
    driver = _native.sweep_start("s.toml", str(tmp_path / "s.db"))
    assert driver.dir == str(here)
    pending = json.loads(driver.pending())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for p in pending:
        result = json.loads(_native.sweep_point("s.toml", driver.text, driver.dir, p["index"]))
        assert result["key"] == p["key"]
        assert result["outcome"]["ok"], result["outcome"]["error"]
        assert driver.record(p["index"], json.dumps(result))
    # Without the folder, the worker cannot read the scenario: a failed outcome, not a crash.
    lost = json.loads(_native.sweep_point("s.toml", driver.text, str(elsewhere), 0))
    assert not lost["outcome"]["ok"] and "one.toml" in lost["outcome"]["error"]
