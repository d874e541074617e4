"""`switchyard.sweep`: the same Rust crate as `switchyard sweep`, a DataFrame back, a second
call computing nothing, the database readable by pandas directly, CSV and Parquet export,
and a bad sweep raising SweepError with file, line and field."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

import switchyard as sy

from conftest import run_cli


def test_sweep_runs_points_into_a_database_and_resumes(tmp_path, cli):
    db = tmp_path / "s.db"
    df = sy.sweep(
        database=db,
        fixed={"size": "small", "gpu": "gtx480"},
        grid={"kernel": ["reduce", "scan"], "seed": [1, 2]},
        jobs=2,
    )
    assert list(df.kernel) == ["reduce", "reduce", "scan", "scan"]
    assert list(df.seed) == [1, 2, 1, 2]
    assert list(df.status) == ["ok"] * 4
    assert (df.verified == 1).all() and (df.cycles > 0).all()
    assert df.attrs["summary"]["computed"] == 4
    # The same cycles as `run` of the same point (the same library call).
    one = sy.run("scan", gpu="gtx480", size="small", seed=2)
    assert int(df.cycles[3]) == one.cycles
    # Again: nothing computed, the same rows.
    again = sy.sweep(
        database=db,
        fixed={"size": "small", "gpu": "gtx480"},
        grid={"kernel": ["reduce", "scan"], "seed": [1, 2]},
    )
    assert again.attrs["summary"]["computed"] == 0
    assert list(again.key) == list(df.key)
    # pandas reads the database directly; the command reads the same rows.
    con = sqlite3.connect(db)
    direct = pd.read_sql("SELECT kernel, seed, cycles FROM results ORDER BY point", con)
    assert con.execute("SELECT COUNT(*) FROM computations").fetchone()[0] == 4
    con.close()
    assert list(direct.cycles) == list(df.cycles)
    out = run_cli(cli, "query", str(db), "--sql", "SELECT cycles FROM results ORDER BY point")
    assert out.returncode == 0, out.stderr
    assert [int(x) for x in out.stdout.split()[1:]] == list(df.cycles)
    # Export: CSV and Parquet give the same rows.
    csv = sy.export(db, tmp_path / "s.csv")
    pq = tmp_path / "s.parquet"
    sy.export(db, pq)
    back = pd.read_parquet(pq)
    assert list(back.key) == list(csv.key)
    assert list(back.cycles) == list(csv.cycles)
    assert json.loads(back.params[0])["kernel"] == "reduce"


def test_a_sweep_file_and_a_bad_one(tmp_path, repo):
    f = tmp_path / "s.toml"
    f.write_text('[fixed]\nkernel = "reduce"\n[grid]\nmax_cycles = [1, 100000000]\n')
    df = sy.sweep(f, database=tmp_path / "s.db")
    assert list(df.status) == ["failed", "ok"]
    assert "cycle" in df.error[0]
    bad = tmp_path / "bad.toml"
    bad.write_text('[fixed]\nkernel = "reduce"\n[grid]\nseed = []\n')
    with pytest.raises(sy.SweepError) as e:
        sy.sweep(bad, database=tmp_path / "b.db")
    assert e.value.location == f"{bad}:4"
    assert e.value.field == "grid.seed"
    assert str(e.value) == f"{bad}:4: `grid.seed`: an empty list: the grid would have no point"
    with pytest.raises(sy.SweepError) as e:
        sy.sweep(database=tmp_path / "b.db", grid={"kernel": ["reduce"], "colour": ["red"]})
    assert e.value.field == "colour"
    assert e.value.location == "<sweep>:4"
