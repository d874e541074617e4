//! `switchyard sweep` end to end: a sweep killed (SIGKILL) twice at arbitrary moments and
//! started again finishes with every point computed exactly once; failed points make the
//! exit status non-zero and keep their error; a bad sweep file names file, line and field.
//! Counting is by the database's rows (`computations` has one per computation), never by
//! wall-clock time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rusqlite::{Connection, OpenFlags};

fn switchyard(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "switchyard-cli-sweep-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Rows of `points`: key -> (run, finished_unix_ms); empty before the sweep made the table.
fn rows(db: &Path) -> BTreeMap<String, (i64, i64)> {
    let Ok(conn) = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return BTreeMap::new();
    };
    let Ok(mut stmt) = conn.prepare("SELECT key, run, finished_unix_ms FROM points") else {
        return BTreeMap::new();
    };
    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// Starts the sweep and SIGKILLs it once `more` points beyond those already in the
/// database are committed. Returns the rows then.
fn kill_after(dir: &Path, more: usize) -> BTreeMap<String, (i64, i64)> {
    let db = dir.join("s.db");
    let before = rows(&db).len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["sweep", "s.toml", "--jobs", "2"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        if rows(&db).len() >= before + more {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the sweep ended ({status}) before it could be killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    rows(&db)
}

#[test]
fn a_killed_sweep_restarts_without_recomputing_or_losing_a_point() {
    let dir = scratch("kill");
    std::fs::write(
        dir.join("s.toml"),
        "description = \"killed and restarted\"\n[fixed]\nsize = \"small\"\ngpu = \"gtx480\"\n[grid]\nkernel = [\"reduce\", \"scan\", \"hist\", \"spmv\"]\nseed = [1, 2, 3, 4]\n",
    )
    .unwrap();
    let db = dir.join("s.db");
    let first = kill_after(&dir, 3);
    assert!(
        (3..16).contains(&first.len()),
        "killed mid-sweep: {} points",
        first.len()
    );
    let second = kill_after(&dir, 2);
    assert!(second.len() >= first.len() + 2 && second.len() < 16);
    let done = switchyard(&dir, &["sweep", "s.toml", "--json"]);
    assert!(done.status.success(), "{}", text(&done));
    let summary: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(summary["points"], 16);
    assert_eq!(summary["reused"].as_u64().unwrap() as usize, second.len());
    assert_eq!(summary["failed"], 0);
    let last = rows(&db);
    assert_eq!(last.len(), 16);
    // Every point computed exactly once, over the three runs.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 16);
    assert_eq!(
        count(&db, "SELECT COUNT(DISTINCT key) FROM computations"),
        16
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM runs"), 3);
    // A point finished before a kill is the very row it was.
    for (key, row) in &second {
        assert_eq!(last.get(key), Some(row), "{key}");
    }
    for (key, row) in &first {
        assert_eq!(row.0, 1);
        assert_eq!(last.get(key), Some(row), "{key}");
    }
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM points WHERE status = 'ok' AND verified = 1"
        ),
        16
    );
    // The export: one CSV line per point, the fields as columns.
    let q = switchyard(&dir, &["query", "s.db", "--csv", "out.csv"]);
    assert!(q.status.success(), "{}", text(&q));
    let csv = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(csv.lines().count(), 17);
    assert!(
        csv.starts_with("key,sweep,point,gpu,kernel,seed,size,status,"),
        "{csv}"
    );
}

#[test]
fn failed_points_set_the_exit_status_and_keep_their_error() {
    let dir = scratch("failed");
    std::fs::write(
        dir.join("s.toml"),
        "[fixed]\nkernel = \"reduce\"\n[grid]\nmax_cycles = [1, 100000000]\n",
    )
    .unwrap();
    for _ in 0..2 {
        let o = switchyard(&dir, &["sweep", "s.toml"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("2 points"), "{}", text(&o));
        assert!(text(&o).contains("1 failed"), "{}", text(&o));
    }
    let db = dir.join("s.db");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 2);
    let q = switchyard(
        &dir,
        &[
            "query",
            "s.db",
            "--sql",
            "SELECT max_cycles, status, error FROM results ORDER BY point",
        ],
    );
    let out = String::from_utf8_lossy(&q.stdout).to_string();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "max_cycles,status,error");
    assert!(
        lines[1].starts_with("1,failed,") && lines[1].contains("cycle"),
        "{out}"
    );
    assert_eq!(lines[2], "100000000,ok,");
}

#[test]
fn a_bad_sweep_file_names_file_line_and_field() {
    let dir = scratch("bad");
    std::fs::write(
        dir.join("s.toml"),
        "[fixed]\nkernel = \"reduce\"\n[grid]\nseed = []\n",
    )
    .unwrap();
    let o = switchyard(&dir, &["sweep", "s.toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "error: s.toml:4: `grid.seed`: an empty list: the grid would have no point\n"
    );
    assert!(!dir.join("s.db").exists(), "nothing written for a bad file");
    let q = switchyard(&dir, &["query", "missing.db"]);
    assert_eq!(q.status.code(), Some(1));
    assert!(text(&q).contains("missing.db"), "{}", text(&q));
}
