//! Rendering diagnostics with their source line, for people.

use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::Buffer};

pub use workload::scenario::name_list;

/// Renders a load error (every diagnostic) with source context and carets.
pub fn render_load_error(e: &gpu::LoadError) -> String {
    let file = SimpleFile::new(e.file.as_str(), e.source_text.as_str());
    let mut buf = Buffer::no_color();
    let config = term::Config::default();
    for d in &e.diagnostics {
        let start = (d.span.start as usize).min(e.source_text.len());
        let end = (d.span.end as usize).clamp(start, e.source_text.len());
        let diag = Diagnostic::error()
            .with_message(&d.message)
            .with_labels(vec![
                Label::primary((), start..end).with_message(&d.location)
            ]);
        if term::emit(&mut buf, &config, &file, &diag).is_err() {
            return e.to_string();
        }
    }
    String::from_utf8_lossy(buf.as_slice()).into_owned()
}
