//! Reading input files as text, with errors that name the file and the place.
//!
//! A UTF-8 byte-order mark is dropped (editors on Windows write one). PTX is read leniently:
//! a byte that is not UTF-8 becomes U+FFFD, which is harmless inside a comment and an error
//! with its line and column anywhere else (the lexer rejects the character). Configuration
//! files are read strictly: a bad byte is an error naming its line and column.

use std::path::Path;

/// Whether bytes that are not UTF-8 are replaced (PTX) or rejected (TOML).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utf8 {
    Lenient,
    Strict,
}

/// The longest text file a command reads (64 MiB: PTX, specs, scenarios, GPU files).
pub const MAX_TEXT_BYTES: u64 = workload::scenario::MAX_PTX_BYTES;

/// Reads `path` as text; errors name `path` (and, for bad UTF-8, the line and column). What
/// is not a regular file (`/dev/zero`, a directory, a FIFO) or is longer than
/// [`MAX_TEXT_BYTES`] is refused before it is read.
pub fn read_text(path: &Path, utf8: Utf8) -> Result<String, String> {
    use workload::Files;
    let bytes = workload::Disk
        .read_at_most(path, MAX_TEXT_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    decode(&bytes, utf8).map_err(|e| format!("{}:{e}", path.display()))
}

/// `bytes` as text (see the module documentation); an error reads `line:column: what`.
pub fn decode(bytes: &[u8], utf8: Utf8) -> Result<String, String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_string()),
        Err(_) if utf8 == Utf8::Lenient => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Err(e) => {
            let at = e.valid_up_to();
            let before = &bytes[..at];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let line_start = before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            let column = String::from_utf8_lossy(&before[line_start..])
                .chars()
                .count()
                + 1;
            Err(format!(
                "{line}:{column}: the file is not UTF-8 text (byte {:#04x})",
                bytes[at]
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_dropped() {
        assert_eq!(decode(b"\xEF\xBB\xBFabc", Utf8::Strict).unwrap(), "abc");
    }

    #[test]
    fn a_bad_byte_is_named_by_line_and_column_or_replaced() {
        let text = b"ok = 1\nname = \"\xe9t\xe9\"\n";
        let e = decode(text, Utf8::Strict).unwrap_err();
        assert_eq!(e, "2:9: the file is not UTF-8 text (byte 0xe9)");
        let s = decode(b"// caf\xe9\n.version 7.0\n", Utf8::Lenient).unwrap();
        assert_eq!(s, "// caf\u{FFFD}\n.version 7.0\n");
    }

    #[test]
    fn special_files_are_refused_before_they_are_read() {
        for special in ["/dev/zero", "/"] {
            let e = read_text(Path::new(special), Utf8::Strict).unwrap_err();
            assert!(
                e.starts_with(&format!("{special}: ")) && e.contains("not a regular file"),
                "{e}"
            );
        }
    }
}
