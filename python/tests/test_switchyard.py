"""The Python package against the `switchyard` command and against independent
expectations (values computed here from the kernels' definitions, not from the program's
own output)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import switchyard as sy
from conftest import run_cli

N = 4096

# y = 2 x + 1 over N elements, x = 0, 1, 2, ..., then y dumped and copied back.
SAXPY = f"""
description = "saxpy from Python"
gpu = "gtx480"

[[process]]
name = "saxpy"
ptx = "../examples/saxpy/saxpy.ptx"

[[process.buffer]]
name = "x"
type = "f32"
len = {N}
init = "iota"

[[process.buffer]]
name = "y"
type = "f32"
len = {N}
init = "fill"
value = 1.0

[[process.command]]
copy = "x"
[[process.command]]
copy = "y"

[[process.command]]
launch = "saxpy"
grid = ["{N} / 256"]
block = [256]
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ f32 = 2.0 }}, {{ u32 = {N} }}]

[[process.command]]
dump = "y"
file = "py-test-y.npy"

[[process.command]]
copy = "y"
direction = "to_host"

[[process.check]]
buffer = "y"
values = [1.0, 3.0, 5.0, 7.0]
"""


def saxpy(repo: Path) -> sy.Scenario:
    # Named as if it sat in scenarios/, so its relative PTX path is found.
    return sy.Scenario.from_toml(SAXPY, file=str(repo / "scenarios" / "py-test.toml"))


def test_presets_and_suite():
    assert "gtx480" in sy.presets()
    kernels = sy.suite_kernels()
    assert {"gemm", "dgemv", "reduce"} <= set(kernels.name)
    # Every kernel's default target is one of its committed targets, and the oldest.
    for row in kernels.itertuples():
        assert row.default_target == min(row.targets)


def test_load_ptx_describes_the_kernel(repo):
    m = sy.load_ptx(str(repo / "examples" / "saxpy" / "saxpy.ptx"))
    assert list(m.kernels.name) == ["saxpy"]
    params = m.params("saxpy")
    # As declared in saxpy.ptx: two pointers, the scale and the count.
    assert list(params["type"]) == ["u64", "u64", "f32", "u32"]
    assert list(params["offset"]) == [0, 8, 16, 20]


def test_ptx_error_names_file_and_line():
    text = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k()\n{\n\tfrobnicate.u32 %r1;\n\tret;\n}\n"
    with pytest.raises(sy.PtxError) as e:
        sy.load_ptx(text=text, name="bad.ptx")
    assert "bad.ptx:6:" in str(e.value)
    assert "frobnicate" in str(e.value)


def test_run_matches_the_command(cli):
    r = sy.run("reduce", gpu="gtx480")
    assert r.verified, r.detail
    assert r.target == sy.suite_kernels().set_index("name").default_target["reduce"]
    assert r.launches == len(r.stats) > 0
    assert r.cycles == int(r.stats["cycles"].sum())
    out = run_cli(
        cli, "run", "reduce", "--gpu", "gtx480", "--target", r.target, "--no-stats", "--json"
    )
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert row["cycles"] == r.cycles
    assert row["warp_instructions"] == r.warp_instructions
    assert row["thread_instructions"] == r.thread_instructions
    assert row["launches"] == r.launches


def test_run_ptx_matches_the_command(cli, repo, tmp_path):
    ptx = repo / "examples" / "saxpy" / "saxpy.ptx"
    spec = repo / "examples" / "saxpy" / "saxpy.toml"
    r = sy.run_ptx(ptx, spec, gpu="gtx480")
    # The spec checks y's first six values, 2 i + 1.
    assert r.kernel == "saxpy" and r.kernels == ["saxpy"] and r.launches == 1
    assert r.checked and r.verified
    assert list(r.checks.buffer) == ["y"] and int(r.checks.checked.sum()) == 6
    assert r.cycles == int(r.stats["cycles"].iloc[0]) > 0
    out = run_cli(cli, "run", str(ptx), "--spec", str(spec), "--gpu", "gtx480", "--no-stats", "--json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert row["cycles"] == r.cycles
    assert row["warp_instructions"] == r.warp_instructions
    assert row["thread_instructions"] == r.thread_instructions
    functional = sy.run_ptx(ptx, spec, timed=False)
    assert functional.verified and functional.cycles is None and functional.stats.empty
    # A spec that names no kernel the module has is an error naming the line and field.
    bad = tmp_path / "bad.toml"
    bad.write_text(spec.read_text().replace('launch = "saxpy"', 'launch = "nope"'))
    where = r"bad.toml:\d+:\d+: `process\[0\].command\[0\].launch`: no kernel `nope`"
    with pytest.raises(sy.ScenarioError, match=where):
        sy.run_ptx(ptx, bad)
    with pytest.raises(sy.PtxError):
        sy.run_ptx(tmp_path / "missing.ptx", spec)


def test_run_functional_has_no_cycles():
    r = sy.run("reduce", timed=False)
    assert r.verified and r.cycles is None and r.stats.empty


def test_unknown_names_are_value_errors():
    with pytest.raises(sy.SwitchyardValueError, match="no suite kernel `nope`"):
        sy.run("nope")
    with pytest.raises(sy.SwitchyardValueError):
        sy.run("reduce", gpu="not-a-gpu")
    with pytest.raises(sy.SwitchyardValueError, match="size `medium`"):
        sy.run("reduce", size="medium")


def test_scenario_runs_and_dumps_the_right_values(repo):
    s = saxpy(repo)
    assert s.processes == ["saxpy"]
    r = s.run()
    assert r.all_verified
    assert list(r.processes["process"]) == ["saxpy"]
    assert len(r.kernels) == 1 and r.kernels["kernel"][0] == "saxpy"
    y = r.dumps["saxpy/y"]
    assert y.dtype == np.float32 and y.shape == (N,)
    np.testing.assert_array_equal(y, 2.0 * np.arange(N, dtype=np.float32) + 1.0)
    # One TB a 256-thread block: every TB dispatched once and finished once.
    moves = r.residency.how.value_counts()
    assert moves["dispatched"] == moves["finished"] == N // 256
    occ = r.sm_occupancy()
    assert (occ.resident_tbs >= 0).all()
    assert (occ.groupby("sm").resident_tbs.last() == 0).all()
    assert int(r.launch_stats["stats.warp_instructions"].sum()) == r.report["warp_instructions"]


def test_scenario_tables_equal_the_commands_csv(cli, repo, tmp_path):
    path = repo / "scenarios" / "priority.toml"
    r = sy.Scenario.load(str(path)).run(policy="fcfs")
    out = run_cli(cli, "scenario", str(path), "--policy", "fcfs", "--csv", str(tmp_path))
    assert out.returncode == 0, out.stderr
    for name in ["processes", "kernels", "copies", "preemption", "bandwidth"]:
        expected = pd.read_csv(tmp_path / f"{name}.csv")
        pd.testing.assert_frame_equal(getattr(r, name), expected, check_dtype=False)
    # Every process's kernels sent requests towards the L2 (their stores: this scenario's
    # outputs stay in the L2, so its DRAM column is all zeros).
    assert set(r.bandwidth.process) == set(r.processes.process)
    assert (r.bandwidth.groupby("process").noc_requests.sum() > 0).all()


def test_scenario_error_is_the_commands(cli, repo, tmp_path):
    bad = SAXPY.replace('init = "iota"', 'init = "iota"\nlenght = 3', 1)
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    with pytest.raises(sy.ScenarioError) as e:
        sy.Scenario.load(str(path))
    # The field and the line the typo is on (counted in the text, not copied from output).
    line = bad.splitlines().index("lenght = 3") + 1
    assert e.value.location.startswith(f"{path}:{line}:")
    assert "lenght" in str(e.value)
    out = run_cli(cli, "scenario", str(path))
    assert out.returncode != 0
    assert str(e.value) in out.stderr


def test_scenario_argument_type_error_names_the_parameter(repo):
    bad = SAXPY.replace("{ u32 = 4096 }", "{ f32 = 4096.0 }")
    with pytest.raises(sy.ScenarioError) as e:
        sy.Scenario.from_toml(bad, file=str(repo / "scenarios" / "bad.toml"))
    line = bad.splitlines().index(
        next(l for l in bad.splitlines() if l.startswith("args ="))
    ) + 1
    assert f":{line}:" in e.value.location
    assert "saxpy_param_3" in str(e.value)


def test_missing_scenario_file():
    with pytest.raises(sy.ScenarioError, match="no-such.toml"):
        sy.Scenario.load("no-such.toml")


def test_bad_override_is_a_value_error(repo):
    with pytest.raises(sy.SwitchyardValueError, match="policy"):
        saxpy(repo).run(policy="no-such-policy")


def test_stepped_run_equals_the_whole_run(repo):
    s = sy.Scenario.load(str(repo / "scenarios" / "priority.toml"))
    whole = s.run(alone=False)
    run = s.start(sample_every=2000)
    seen = []
    for c in (1000, 5000, 20000):
        snap = run.run_until(c)
        assert snap is not None and snap.cycle >= c
        assert len(snap.sms) == 15  # the GTX480's SMs
        seen.append(int(snap.sms.warp_instructions.sum()))
    assert seen == sorted(seen) and seen[-1] > 0
    with pytest.raises(sy.SwitchyardValueError, match="only goes forward"):
        run.run_until(10)
    r = run.finish()
    assert run.done
    assert r.cycles == whole.cycles
    pd.testing.assert_frame_equal(r.kernels, whole.kernels)
    pd.testing.assert_frame_equal(r.residency, whole.residency)
    # Samples: one per multiple of 2000 the run stepped through; counters only grow.
    per_sample = r.sm_samples.groupby("sample_of").warp_instructions.sum()
    assert per_sample.is_monotonic_increasing
    assert per_sample.iloc[-1] <= r.report["warp_instructions"]
    assert run.run_until(10**12) is None


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_closing_a_stepped_run_ends_its_thread(repo):
    s = sy.Scenario.load(str(repo / "scenarios" / "priority.toml"))
    before = _threads()
    run = s.start()
    assert _threads() == before + 1
    assert run.run_until(1000) is not None
    run.close()
    assert _threads() == before
    assert run.run_until(5000) is None
    with pytest.raises(sy.RunError, match="closed"):
        run.finish()


def test_preemption_records(repo):
    r = sy.Scenario.load(str(repo / "scenarios" / "priority.toml")).run(
        policy="ppq", mechanism="ctxback", alone=False
    )
    assert r.all_verified
    events = set(r.preemptions.event)
    assert "requested" in events and "preempted" in events
    # Every TB evicted from an SM was preempted by the mechanism, and restored later.
    evicted = (r.residency.how == "evicted").sum()
    assert evicted == (r.preemptions.event == "preempted").sum() > 0
    assert (r.residency.how == "restored").sum() == evicted
    # Resident TBs per SM, counted through evictions and restores: never negative, never
    # above what the GTX480's SM holds (8 TBs), and none left at the end.
    occ = r.sm_occupancy()
    assert occ.resident_tbs.between(0, 8).all()
    assert (occ.groupby("sm").resident_tbs.last() == 0).all()
    assert r.preemption["mechanism"].eq("ctxback").all()


def test_study_small():
    st = sy.study(low="dgemv", low_size="small", high="gemm", mechanisms="drain,ctxback", threads=2)
    assert list(st.rows.mechanism) == ["npq (no preemption)", "drain", "ctxback"]
    assert st.all_exact
    # The reference preempts nothing; the high-priority process waits less when preempting.
    assert st.rows["preemption.requests"][0] == 0
    assert st.rows.high_wait_us[2] <= st.rows.high_wait_us[0]
