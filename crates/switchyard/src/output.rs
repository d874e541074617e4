//! Output files: written whole, through a temporary file beside the target and a rename,
//! so that an interrupted or failed run never leaves a file truncated or half-replaced.
//!
//! A run killed outright (SIGKILL) may leave its temporary file behind; the next write to the
//! same path removes the temporaries of processes that no longer exist. SIGINT and SIGTERM
//! ([`exit_cleanly_on_signals`]) wait for a write in progress to finish, then exit.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Held while a file is written and renamed into place; the signal handler takes it before
/// exiting, so that no write is cut in half. (Process-wide by nature: a signal is.)
static WRITING: Mutex<()> = Mutex::new(());

/// Exit status after SIGINT or SIGTERM (128 + SIGINT's number, as shells report it).
pub const INTERRUPTED: i32 = 130;

/// Writes `bytes` to `path` atomically. The temporary name carries the process id, so two
/// runs writing the same path do not share it; errors name `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let _writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    remove_stale_temporaries(path);
    let tmp = temporary(path, std::process::id());
    std::fs::write(&tmp, bytes).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

/// Creates directory `dir` and its parents where missing; the error names it.
pub fn create_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Writes `bytes` to `dir/name` atomically ([`write_atomic`]), creating `dir` first: how
/// an experiment's `--csv DIR` and `--plots DIR` write each file.
pub fn write_into(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    create_dir(dir)?;
    write_atomic(&dir.join(name), bytes)
}

/// Prints `value` on standard output as indented JSON (`--json`).
pub fn print_json<T: serde::Serialize + ?Sized>(value: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("results serialize")
    );
}

/// Writes several files as a set: every one to its temporary first, then (only when all are
/// written) every rename, under the write lock, so a failure leaves all the previous files
/// and SIGINT or SIGTERM never falls between the renames. A rename that fails (the target a
/// directory, say) undoes the renames before it: each previous file is kept as a hard link
/// (or a copy) beside it until the whole set is in place, then put back, and a file that did
/// not exist before is removed again. Errors name the file. (Only SIGKILL or a crash between
/// two renames, microseconds apart, can leave a mixture.)
pub fn write_all_atomic(files: &[(PathBuf, Vec<u8>)]) -> Result<(), String> {
    let _writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let mut written: Vec<(PathBuf, &Path)> = Vec::new();
    let cleanup = |written: &[(PathBuf, &Path)]| {
        for (tmp, _) in written {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for (path, bytes) in files {
        remove_stale_temporaries(path);
        let tmp = temporary(path, std::process::id());
        if let Err(e) = std::fs::write(&tmp, bytes) {
            let _ = std::fs::remove_file(&tmp);
            cleanup(&written);
            return Err(format!("{}: {e}", path.display()));
        }
        written.push((tmp, path));
    }
    // The previous file of each target (None: there was none), kept until every rename is
    // done.
    let mut kept: Vec<Option<PathBuf>> = Vec::new();
    for (_, path) in &written {
        match keep_previous(path) {
            Ok(k) => kept.push(k),
            Err(e) => {
                cleanup(&written);
                drop_kept(&kept);
                return Err(format!("{}: {e}", path.display()));
            }
        }
    }
    for (i, (tmp, path)) in written.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            cleanup(&written[i..]);
            for ((_, done), previous) in written[..i].iter().zip(&kept) {
                match previous {
                    Some(k) => {
                        let _ = std::fs::rename(k, done);
                    }
                    None => {
                        let _ = std::fs::remove_file(done);
                    }
                }
            }
            drop_kept(&kept[i..]);
            return Err(format!("{}: {e}", path.display()));
        }
    }
    drop_kept(&kept);
    Ok(())
}

/// Keeps the file at `path`, if there is one, under a hidden name beside it (a hard link,
/// or a copy where the file system has none), so a set's rename can be undone.
fn keep_previous(path: &Path) -> std::io::Result<Option<PathBuf>> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        // Not a file (a directory, say): the rename onto it fails and nothing is undone.
        Ok(m) if !m.is_file() => return Ok(None),
        Ok(_) => {}
    }
    let kept = path.with_file_name(format!(".{}.old-{}", file_name(path), std::process::id()));
    let _ = std::fs::remove_file(&kept);
    if std::fs::hard_link(path, &kept).is_err() {
        std::fs::copy(path, &kept)?;
    }
    Ok(Some(kept))
}

fn drop_kept(kept: &[Option<PathBuf>]) {
    for k in kept.iter().flatten() {
        let _ = std::fs::remove_file(k);
    }
}

/// Removes `path` if it exists (under the write lock); errors name it.
pub fn remove(path: &Path) -> Result<(), String> {
    let _writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("{}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The temporary file process `pid` writes `path` through: hidden, beside it.
fn temporary(path: &Path, pid: u32) -> PathBuf {
    path.with_file_name(format!(".{}.tmp-{pid}", file_name(path)))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Removes temporaries (and kept previous files) of `path` left by processes that were
/// killed (Linux: a process exists while `/proc/PID` does; elsewhere nothing is removed).
fn remove_stale_temporaries(path: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Temporaries, and previous files a set kept while it was renamed (`write_all_atomic`).
    let prefixes = [
        format!(".{}.tmp-", file_name(path)),
        format!(".{}.old-", file_name(path)),
    ];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = prefixes
            .iter()
            .find_map(|p| name.strip_prefix(p.as_str()))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// On SIGINT, SIGTERM or SIGHUP: let a write in progress finish, then exit with
/// [`INTERRUPTED`]. Files already written stay as they are: complete results, or partial
/// ones in files that say so.
pub fn exit_cleanly_on_signals() {
    // A reader that stops reading (`switchyard check | head`) ends the process quietly, as
    // for any Unix tool, with the status a SIGPIPE gives (128 + 13). Rust ignores SIGPIPE,
    // so the next `println!` panics instead: that one panic becomes the quiet exit. Files
    // are unaffected: every write is a rename of a complete file.
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
    // Failing to install the handler (another one is installed) leaves the default, which
    // is still safe for the files: every write is a rename of a complete file.
    let _ = ctrlc::set_handler(|| {
        let _writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("\ninterrupted");
        std::process::exit(INTERRUPTED);
    });
}

/// Writes every dump's `.npy` file (creating its directory), and says for each where it
/// went and what it holds.
pub fn write_dumps(dumps: &[workload::Dumped]) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for d in dumps {
        let path = &d.file.path;
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        write_atomic(path, &d.npy()).map_err(|e| format!("{}: dump: {e}", d.file.at))?;
        let shape: Vec<String> = d.file.shape.iter().map(u64::to_string).collect();
        lines.push(format!(
            "dump: {} ({} `{}`, {} [{}], at {:.1} µs)",
            path.display(),
            d.process,
            d.file.buffer,
            d.file.ty.npy_descr(),
            shape.join(", "),
            d.at_fs as f64 / workload::system::FS_PER_US as f64
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporaries_of_dead_processes_are_removed_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("sy-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.json");
        // No process has a PID above Linux's pid_max (at most 2^22).
        let dead = temporary(&path, u32::MAX - 1);
        let live = temporary(&path, 1);
        std::fs::write(&dead, b"{").unwrap();
        std::fs::write(&live, b"{").unwrap();
        write_atomic(&path, b"{}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        if Path::new("/proc/self").exists() {
            assert!(!dead.exists(), "a dead process's temporary stays");
        }
        assert!(live.exists(), "a live process's temporary was removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_set_is_replaced_whole_or_not_at_all() {
        let dir = std::env::temp_dir().join(format!("sy-output-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.csv"), dir.join("b.csv"));
        write_all_atomic(&[(a.clone(), b"a1".to_vec()), (b.clone(), b"b1".to_vec())]).unwrap();
        // The second file cannot be written: the first keeps its previous contents too.
        let missing = dir.join("no-such-dir").join("c.csv");
        let e = write_all_atomic(&[
            (a.clone(), b"a2".to_vec()),
            (missing.clone(), b"c".to_vec()),
        ])
        .unwrap_err();
        assert!(e.contains("c.csv"), "{e}");
        assert_eq!(std::fs::read(&a).unwrap(), b"a1");
        assert_eq!(std::fs::read(&b).unwrap(), b"b1");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rename_that_fails_puts_back_the_files_renamed_before_it() {
        let dir = std::env::temp_dir().join(format!("sy-output-undo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b, c) = (dir.join("a.csv"), dir.join("b.csv"), dir.join("c.json"));
        write_all_atomic(&[(a.clone(), b"a1".to_vec())]).unwrap();
        // Every temporary can be written, but the last rename fails: its target is a
        // directory that is not empty. `a` had a previous file, `b` had none.
        std::fs::create_dir_all(c.join("inside")).unwrap();
        let e = write_all_atomic(&[
            (a.clone(), b"a2".to_vec()),
            (b.clone(), b"b2".to_vec()),
            (c.clone(), b"c2".to_vec()),
        ])
        .unwrap_err();
        assert!(e.contains("c.json"), "{e}");
        assert_eq!(
            std::fs::read(&a).unwrap(),
            b"a1",
            "a new file beside an old set"
        );
        assert!(!b.exists(), "a new file beside an old set");
        assert!(c.join("inside").is_dir());
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a.csv", "c.json"], "temporaries or kept files left");
        // With the directory gone, the set is replaced whole and nothing is left beside it.
        std::fs::remove_dir_all(&c).unwrap();
        write_all_atomic(&[
            (a.clone(), b"a3".to_vec()),
            (b.clone(), b"b3".to_vec()),
            (c.clone(), b"c3".to_vec()),
        ])
        .unwrap();
        for (p, want) in [(&a, b"a3"), (&b, b"b3"), (&c, b"c3")] {
            assert_eq!(&std::fs::read(p).unwrap(), want);
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
