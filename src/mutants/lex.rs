//! A token stream of a CUDA C++ source, enough for the mutation rules: the
//! code's identifiers, numbers and punctuators with their byte spans and
//! lines. Comments and string or character literals are skipped (never
//! mutated: an `asm` string is PTX, not C++). Preprocessor lines are skipped
//! too, but for the body of an object-like `#define` (a constant such as
//! `BP_EPS` is code the kernels use), whose tokens are kept.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ident,
    Number,
    Punct,
}

/// One token: `text` is `source[start..end]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub text: String,
    pub start: usize,
    pub end: usize,
    /// 1-based line of `start`.
    pub line: usize,
}

/// The punctuators of three and two characters, longest first.
const PUNCT3: [&str; 4] = ["<<=", ">>=", "...", "->*"];
const PUNCT2: [&str; 19] =
    ["<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "->"];
/// `::` is kept as one token so that `bp::add` reads as three tokens.
const SCOPE: &str = "::";

/// The tokens of `src`.
pub fn tokens(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    // Whether only blanks precede `i` on its line (a `#` there starts a directive).
    let mut line_start = true;
    // Inside a `#define` body: the end of the directive (its last byte).
    let mut directive_end: Option<usize> = None;
    while i < b.len() {
        if directive_end.is_some_and(|e| i >= e) {
            directive_end = None;
        }
        let c = b[i];
        if c == b'\n' {
            line += 1;
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i = (i + 2).min(b.len());
            continue;
        }
        if c == b'#' && line_start {
            let end = directive_span_end(b, i);
            let text = &src[i..end];
            match define_body(text) {
                Some(body) => {
                    directive_end = Some(end);
                    i += body;
                }
                None => {
                    line += text.matches('\n').count();
                    i = end;
                }
            }
            line_start = false;
            continue;
        }
        line_start = false;
        if c == b'\\' && b.get(i + 1) == Some(&b'\n') {
            // A continuation inside a #define body.
            i += 1;
            continue;
        }
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                if b.get(i) == Some(&b'\n') {
                    line += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            continue;
        }
        let start = i;
        let kind = if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            Kind::Ident
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            i = number_end(b, i);
            Kind::Number
        } else {
            let rest = &src[i..];
            let n = if PUNCT3.iter().any(|p| rest.starts_with(p)) {
                3
            } else if rest.starts_with(SCOPE) || PUNCT2.iter().any(|p| rest.starts_with(p)) {
                2
            } else {
                // One byte, or one whole UTF-8 character.
                rest.chars().next().map_or(1, char::len_utf8)
            };
            i += n;
            Kind::Punct
        };
        out.push(Token { kind, text: src[start..i].to_string(), start, end: i, line });
    }
    out
}

/// The end of the directive starting at `i` (its newline, continuations
/// included).
fn directive_span_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
            i += 2;
            continue;
        }
        if b[i] == b'\n' {
            return i;
        }
        i += 1;
    }
    i
}

/// For `#define NAME body` (object-like, one line): the offset of the body
/// within the directive. Function-like macros (`NAME(`) and every other
/// directive: `None`.
fn define_body(directive: &str) -> Option<usize> {
    let rest = directive.strip_prefix('#')?.trim_start();
    let after = rest.strip_prefix("define")?;
    if directive.contains("\\\n") {
        return None;
    }
    let name_start = after.len() - after.trim_start().len();
    let name = &after[name_start..];
    let name_len = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(name.len());
    if name[name_len..].starts_with('(') {
        return None;
    }
    Some(directive.len() - name[name_len..].len())
}

/// The end of a number literal starting at `i`: digits, hex digits, a
/// fraction, an exponent with its sign, suffixes.
fn number_end(b: &[u8], mut i: usize) -> usize {
    let hex = b[i] == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X'));
    if hex {
        i += 2;
    }
    while i < b.len() {
        let c = b[i];
        let exp = if hex { matches!(c, b'p' | b'P') } else { matches!(c, b'e' | b'E') };
        if exp && matches!(b.get(i + 1), Some(b'+' | b'-')) {
            i += 2;
        } else if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' {
            i += 1;
        } else {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<String> {
        tokens(src).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn comments_strings_and_directives_are_not_code() {
        let src = "#include \"a.cuh\"\n// x + y\nint a = b /* c - d */ + 1; asm(\"add.f32 %0;\");\n#pragma unroll\n";
        assert_eq!(texts(src), ["int", "a", "=", "b", "+", "1", ";", "asm", "(", ")", ";"]);
        assert_eq!(tokens(src)[0].line, 3);
    }

    #[test]
    fn a_define_body_is_code_and_function_like_macros_are_not() {
        let src = "#define BP_EPS __uint_as_float(0x2b8cbcccu)   // 1e-12f\n#define F(x) x + 1\nfoo";
        assert_eq!(texts(src), ["__uint_as_float", "(", "0x2b8cbcccu", ")", "foo"]);
        assert_eq!(tokens(src)[4].line, 3);
    }

    #[test]
    fn numbers_operators_and_lines() {
        let src = "x = 1.0e-20f + 0x1.8p+3f;\ny <<= 2u; a->b; bp::add(i >= 0, j)";
        assert_eq!(
            texts(src),
            [
                "x",
                "=",
                "1.0e-20f",
                "+",
                "0x1.8p+3f",
                ";",
                "y",
                "<<=",
                "2u",
                ";",
                "a",
                "->",
                "b",
                ";",
                "bp",
                "::",
                "add",
                "(",
                "i",
                ">=",
                "0",
                ",",
                "j",
                ")"
            ]
        );
        let t = tokens(src);
        assert_eq!((t[6].line, &src[t[7].start..t[7].end]), (2, "<<="));
    }

    #[test]
    fn a_multiline_macro_is_skipped_and_lines_still_count() {
        let src = "#define M(a) \\\n    a + 1\nz";
        let t = tokens(src);
        assert_eq!((t.len(), t[0].text.as_str(), t[0].line), (1, "z", 3));
    }
}
