//! Text that reaches a terminal. Strings bitparity reads (a corpus entry's
//! subject and date, a summary's names, a file name, a provider's error
//! message and stderr) are untrusted: an escape sequence in one could move
//! the cursor, erase a line and print `ok` over a `FAIL`. Everything such a
//! string may hold that a terminal or a viewer interprets instead of
//! showing is written as a visible escape (`\u{1b}`).

/// Whether a terminal or a text viewer acts on `c` instead of drawing it:
/// the C0 and C1 controls, DEL, and the Unicode format characters that
/// reorder or hide text (bidirectional overrides and isolates, zero-width
/// characters, the line and paragraph separators).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}')
}

fn escape(s: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if hidden(c) && !(keep_newlines && c == '\n') {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// One field on one line (a subject's name, a path, a date): every hidden
/// character escaped, the line breaks too, so that a field cannot start a
/// line of its own.
pub fn visible(s: &str) -> String {
    escape(s, false)
}

/// Text of several lines as printed (a table, a failure's report): line
/// breaks kept, every other hidden character escaped. The last guard before
/// stdout and stderr.
pub fn visible_lines(s: &str) -> String {
    escape(s, true)
}

/// A path, as [`visible`] shows it.
pub fn path(p: &std::path::Path) -> String {
    visible(&p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        assert_eq!(visible("ok"), "ok");
        assert_eq!(visible("a\u{1b}[2Kb"), "a\\u{1b}[2Kb");
        assert_eq!(visible("x\ny\rz\t"), "x\\u{a}y\\u{d}z\\u{9}");
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(visible("\u{202e}txt.exe"), "\\u{202e}txt.exe");
        assert_eq!(visible("\u{7f}"), "\\u{7f}");
        assert_eq!(visible_lines("a\nb\u{1b}"), "a\nb\\u{1b}");
        // Printable text of any script is kept as it is.
        assert_eq!(visible("Größe 2^-24 · μ"), "Größe 2^-24 · μ");
    }
}
