//! The results database: one SQLite file, one row per point key.
//!
//! Tables:
//! * `points`: one row per key: the point's fields (`params`, JSON), `status` (`ok` or
//!   `failed`), `error`, the headline numbers (`verified`, `cycles`, `warp_instructions`,
//!   `simulated_us`, `launches`, `antt`, `stp`, `fairness`, `wall_s`), the whole `result`
//!   (JSON), the `run` that computed it and the Switchyard version.
//! * `runs`: one row per start of a sweep on this database.
//! * `computations`: one row each time a point was computed (key, run, status): a sweep
//!   that never recomputes a point leaves exactly one row per key here, unless a failed point
//!   was retried (`--retry-failed`).
//! * the view `results`: `points` with each field of the last sweep run as its own column
//!   (`json_extract`), what `pd.read_sql("SELECT * FROM results", con)` reads.
//!
//! Invariants: each point's row (and its `computations` row) is written in its own
//! transaction, so a sweep killed at any moment loses at most the points still running;
//! a finished row is never replaced except a failed one by a retry in a later run; recording
//! a key that already has its row (an `ok` one, or one this run wrote) writes nothing, so a
//! result delivered twice (a distributed executor's retry) still leaves one row.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use crate::point::Outcome;

/// A results database, open.
pub struct Db {
    conn: Connection,
    /// This run's number (`runs.run`).
    pub run: i64,
}

/// A database error, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {error}")]
pub struct DbError {
    pub file: String,
    pub error: rusqlite::Error,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run INTEGER PRIMARY KEY,
    sweep TEXT NOT NULL,
    points INTEGER NOT NULL,
    switchyard TEXT NOT NULL,
    started_unix_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    sweep TEXT NOT NULL,
    point INTEGER NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    verified INTEGER,
    cycles INTEGER,
    warp_instructions INTEGER,
    simulated_us REAL,
    launches INTEGER,
    antt REAL,
    stp REAL,
    fairness REAL,
    wall_s REAL,
    result TEXT,
    run INTEGER NOT NULL REFERENCES runs(run),
    switchyard TEXT NOT NULL,
    finished_unix_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS computations (
    key TEXT NOT NULL,
    run INTEGER NOT NULL,
    status TEXT NOT NULL
);
";

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Db {
    /// Opens (creating if needed) the database at `path` and records a new run of `sweep`
    /// with `points` points, whose fields are `fields` (the view's columns).
    pub fn open(path: &Path, sweep: &str, points: usize, fields: &[String]) -> Result<Db, DbError> {
        let file = path.display().to_string();
        let e = |error| DbError {
            file: file.clone(),
            error,
        };
        let conn = Connection::open(path).map_err(e)?;
        // WAL: readers (pandas, a test watching) never block the sweep; NORMAL is durable
        // against the process being killed (only a power loss may lose the last commits).
        conn.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(e)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(e)?;
        conn.execute_batch(SCHEMA).map_err(e)?;
        conn.execute(
            "INSERT INTO runs (sweep, points, switchyard, started_unix_ms) VALUES (?1, ?2, ?3, ?4)",
            params![sweep, points as i64, env!("CARGO_PKG_VERSION"), now_ms()],
        )
        .map_err(e)?;
        let run = conn.last_insert_rowid();
        let mut columns = String::new();
        for f in fields {
            let json_path = format!("$.\"{}\"", f.replace('"', ""));
            columns.push_str(&format!(
                ", json_extract(params, '{}') AS \"{}\"",
                json_path.replace('\'', "''"),
                f.replace('"', "\"\"")
            ));
        }
        conn.execute_batch(&format!(
            "DROP VIEW IF EXISTS results; CREATE VIEW results AS SELECT key, sweep, point{columns}, status, error, verified, cycles, warp_instructions, simulated_us, launches, antt, stp, fairness, wall_s, run, switchyard, finished_unix_ms, params, result FROM points;"
        ))
        .map_err(e)?;
        Ok(Db { conn, run })
    }

    fn err(&self, error: rusqlite::Error) -> DbError {
        DbError {
            file: self.conn.path().unwrap_or("").to_string(),
            error,
        }
    }

    /// The status of `key` (`ok`, `failed`), if it has a row.
    pub fn status(&self, key: &str) -> Result<Option<String>, DbError> {
        self.conn
            .query_row(
                "SELECT status FROM points WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Records point `point` of `sweep` (key `key`) and its outcome, in one transaction:
    /// a new row, or a failed row of an earlier run replaced by a retry. Returns whether it
    /// wrote: a key whose row is `ok`, or was written by this run, is left as it is (the
    /// same point's result delivered twice).
    pub fn record(
        &mut self,
        key: &str,
        sweep: &str,
        point: usize,
        params: &serde_json::Value,
        o: &Outcome,
    ) -> Result<bool, DbError> {
        let run = self.run;
        let file = self.conn.path().unwrap_or("").to_string();
        let e = |error| DbError {
            file: file.clone(),
            error,
        };
        let tx = self.conn.transaction().map_err(e)?;
        let status = if o.ok { "ok" } else { "failed" };
        let written = (|| {
            // Checked inside the transaction: the row read is the row replaced.
            let had: Option<(String, i64)> = tx
                .query_row(
                    "SELECT status, run FROM points WHERE key = ?1",
                    params![key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            match had {
                None => {}
                // A failed row of an earlier run is replaced by a retry.
                Some((s, r)) if s == "failed" && r != run => {}
                // An `ok` row is final; a row of this run is this very result again.
                Some(_) => return Ok(false),
            }
            tx.execute(
                "DELETE FROM points WHERE key = ?1 AND status = 'failed'",
                params![key],
            )?;
            tx.execute(
                "INSERT INTO points (key, sweep, point, params, status, error, verified, cycles,
                 warp_instructions, simulated_us, launches, antt, stp, fairness, wall_s, result,
                 run, switchyard, finished_unix_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                 ?17, ?18, ?19)",
                params![
                    key,
                    sweep,
                    point as i64,
                    params.to_string(),
                    status,
                    o.error,
                    o.verified,
                    o.cycles.map(|c| c as i64),
                    o.warp_instructions.map(|c| c as i64),
                    o.simulated_us,
                    o.launches.map(|c| c as i64),
                    o.antt,
                    o.stp,
                    o.fairness,
                    o.wall_s,
                    o.result,
                    run,
                    env!("CARGO_PKG_VERSION"),
                    now_ms(),
                ],
            )?;
            tx.execute(
                "INSERT INTO computations (key, run, status) VALUES (?1, ?2, ?3)",
                params![key, run, status],
            )?;
            Ok(true)
        })();
        match written {
            Ok(wrote) => tx.commit().map(|()| wrote).map_err(e),
            Err(error) => Err(e(error)),
        }
    }
}

/// The rows of `sql` (default: every row of the `results` view) as CSV text with a header.
pub fn query_csv(path: &Path, sql: Option<&str>) -> Result<String, DbError> {
    let file = path.display().to_string();
    let e = |error| DbError {
        file: file.clone(),
        error,
    };
    if !path.is_file() {
        return Err(e(rusqlite::Error::InvalidPath(path.to_path_buf())));
    }
    let conn =
        Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(e)?;
    let sql = sql.unwrap_or("SELECT * FROM results ORDER BY sweep, point");
    let mut stmt = conn.prepare(sql).map_err(e)?;
    let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let mut out = String::new();
    let row_text: Vec<String> = names.iter().map(|n| csv_field(n)).collect();
    out.push_str(&row_text.join(","));
    out.push('\n');
    let mut rows = stmt.query([]).map_err(e)?;
    while let Some(r) = rows.next().map_err(e)? {
        let mut fields = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            use rusqlite::types::ValueRef;
            let v = r.get_ref(i).map_err(e)?;
            fields.push(match v {
                ValueRef::Null => String::new(),
                ValueRef::Integer(i) => i.to_string(),
                ValueRef::Real(x) => x.to_string(),
                ValueRef::Text(t) => csv_field(&String::from_utf8_lossy(t)),
                ValueRef::Blob(b) => csv_field(&format!("<{} bytes>", b.len())),
            });
        }
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    Ok(out)
}

/// A CSV field, quoted where it must be (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
