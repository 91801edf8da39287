//! Where a command's text goes: stdout (escaped: nothing read from a file
//! or a child acts on the terminal), a report file, or both.

use crate::fsio::write_report;
use crate::report::{self, RunReport};
use std::io::Write;
use std::path::Path;

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic:
/// the rest of the output is dropped.
pub(crate) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    // The last guard: nothing read from a file or a child acts on the
    // terminal (src/escape.rs).
    let text = crate::escape::visible_lines(text);
    if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
        // EPIPE or another write error: nothing more can be shown.
    }
}

/// Writes `text` to `path`, or to stdout for `-`.
pub(crate) fn write_output(path: &Path, text: &str) -> Result<(), String> {
    if path == Path::new("-") {
        emit(text);
        Ok(())
    } else {
        write_report(path, text.as_bytes())
    }
}

/// Where a run's reports go (each checked writable before the run).
pub(crate) struct Outputs<'a> {
    pub(crate) json: Option<&'a Path>,
    pub(crate) markdown: Option<&'a Path>,
    pub(crate) html: Option<&'a Path>,
}

/// Prints a run's table (to stderr when a report goes to stdout), writes
/// its JSON, Markdown and HTML where asked; the run's exit code.
pub(crate) fn write_run(run: &RunReport, out: &Outputs, title: &str) -> super::Outcome {
    let table = report::to_table(run);
    let to_stdout = [out.json, out.markdown, out.html].contains(&Some(Path::new("-")));
    if to_stdout {
        eprint!("{}", crate::escape::visible_lines(&table));
    } else {
        emit(&table);
    }
    if let Some(p) = out.json {
        write_output(p, &report::to_json(run))?;
    }
    if let Some(p) = out.markdown {
        write_output(p, &report::to_markdown(run, &format!("{title}, {}", crate::corpus::today())))?;
    }
    if let Some(p) = out.html {
        write_output(p, &crate::html::to_html(run, &crate::html::title(title)))?;
    }
    Ok(run.verdict().exit_code())
}
