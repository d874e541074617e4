//! `switchyard sweep` and `switchyard query`: a sweep's points run side by side into a
//! results database (crate `sweep`), and that database's rows as CSV.
//!
//! `sweep --ray ADDRESS` runs the points on a Ray cluster instead. Ray has no Rust client, so
//! the command hands the sweep to the Python package's Ray backend (`python3 -m
//! switchyard._ray`, the interpreter named by `SWITCHYARD_PYTHON` if set), which uses the same
//! `sweep` crate through the bindings and writes the same database; this crate stays free of
//! Python.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Outcome;

#[derive(clap::Args)]
pub(crate) struct SweepArgs {
    /// The sweep file (TOML: `[fixed]`, `[grid]` and `[[point]]`; see `crates/sweep/src/spec.rs`).
    file: PathBuf,
    /// The results database (SQLite; created if missing). Default: the sweep file with `.db`
    /// for `.toml`.
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Points run side by side (default: this machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// Run the points as tasks on the Ray cluster at ADDRESS (`HOST:PORT`), through the
    /// Python package (`pip install ./python[ray]`; `SWITCHYARD_PYTHON` names the
    /// interpreter, default `python3`). The database stays on this machine.
    #[arg(long, value_name = "ADDRESS", conflicts_with = "jobs")]
    ray: Option<String>,
    /// Run again the points the database records as failed.
    #[arg(long)]
    retry_failed: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub(crate) struct QueryArgs {
    /// The results database a sweep wrote.
    db: PathBuf,
    /// The query (default: `SELECT * FROM results ORDER BY sweep, point`: every point, its
    /// fields as columns).
    #[arg(long)]
    sql: Option<String>,
    /// Write the CSV to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

pub(crate) fn sweep(args: SweepArgs) -> Outcome {
    let file = args.file.display().to_string();
    let text = switchyard::input::read_text(&args.file, switchyard::input::Utf8::Strict)?;
    let sweep = sweep::parse(&file, &text).map_err(|e| e.to_string())?;
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| args.file.with_extension("db"));
    if let Some(address) = &args.ray {
        return sweep_on_ray(&args, &file, &db, address);
    }
    let jobs = super::sm_threads(args.jobs);
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "sweep [{bar:30}] {pos}/{len} points, {msg} ({elapsed}, ETA {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut first = true;
    let summary = sweep::run(
        &sweep,
        &db,
        sweep::Options {
            jobs,
            retry_failed: args.retry_failed,
        },
        &switchyard::suite_run::sweep_kernel,
        &mut |p| {
            if first {
                // The ETA counts only the points run now.
                bar.set_length(p.total as u64);
                bar.set_position(p.done as u64);
                bar.reset_eta();
                first = false;
            }
            bar.set_position(p.done as u64);
            bar.set_message(format!("{} run now, {} failed", p.computed, p.failed));
        },
    )
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    print_summary(
        &args,
        &file,
        &db,
        &Counts {
            run: summary.run,
            points: summary.points,
            reused: summary.reused,
            computed: summary.computed,
            failed: summary.failed,
            database_s: summary.database.as_secs_f64(),
        },
    );
    Ok(summary.failed == 0)
}

/// A sweep's summary as printed (from `sweep::Summary`, or from the Python Ray backend's
/// JSON).
#[derive(serde::Deserialize)]
struct Counts {
    run: i64,
    points: usize,
    reused: usize,
    computed: usize,
    failed: usize,
    database_s: f64,
}

/// Runs the sweep on the Ray cluster at `address` through the Python package: its standard
/// error passes through, its last line of standard output is the summary (JSON).
fn sweep_on_ray(args: &SweepArgs, file: &str, db: &std::path::Path, address: &str) -> Outcome {
    let python = std::env::var("SWITCHYARD_PYTHON").unwrap_or_else(|_| "python3".into());
    let needs = "`--ray` runs the sweep through Python with the switchyard package and Ray \
                 (`pip install ./python[ray]`; SWITCHYARD_PYTHON names the interpreter)";
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "switchyard._ray", file, "--db"])
        .arg(db)
        .args(["--address", address]);
    if args.retry_failed {
        cmd.arg("--retry-failed");
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{needs}: could not start `{python}`: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{needs}: `{python} -m switchyard._ray` failed ({}); its message is above",
            out.status
        ));
    }
    let counts: Counts = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            format!(
                "`{python} -m switchyard._ray` printed no summary: {}",
                stdout.trim()
            )
        })?;
    print_summary(args, file, db, &counts);
    Ok(counts.failed == 0)
}

fn print_summary(args: &SweepArgs, file: &str, db: &std::path::Path, summary: &Counts) {
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "sweep": file,
                "database": db.display().to_string(),
                "run": summary.run,
                "points": summary.points,
                "reused": summary.reused,
                "computed": summary.computed,
                "failed": summary.failed,
                "database_s": summary.database_s,
            })
        );
    } else {
        println!(
            "sweep {file}: {} points ({} already in {}, {} run now), {} failed; database writes {:.3} s",
            summary.points,
            summary.reused,
            db.display(),
            summary.computed,
            summary.failed,
            summary.database_s
        );
        if summary.failed > 0 {
            println!(
                "failed points: switchyard query {} --sql \"SELECT point, params, error FROM points WHERE status = 'failed'\"",
                db.display()
            );
        }
    }
}

pub(crate) fn query(args: QueryArgs) -> Outcome {
    let csv = sweep::query_csv(&args.db, args.sql.as_deref()).map_err(|e| e.to_string())?;
    match &args.csv {
        Some(path) => switchyard::output::write_atomic(path, csv.as_bytes())?,
        None => print!("{csv}"),
    }
    Ok(true)
}
