//! Output files: written whole, through a temporary file beside the target and a rename,
//! so that an interrupted or failed run never leaves a file truncated or half-replaced.

use std::path::Path;

/// Writes `bytes` to `path` atomically. The temporary name carries the process id, so two
/// runs writing the same path do not share it; errors name `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}
