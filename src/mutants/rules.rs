//! The mutation rules: each reads a source's tokens and proposes edits, one
//! mutant per edit. They are the mistakes the kernels of this field are known
//! to ship: an operator or comparison off by one case, an index or bound off
//! by one, a constant a bit off or of the wrong sign of zero, a rounding
//! intrinsic swapped for a faster or fused one, a reduction in the other
//! order, a shuffle reading the wrong lane, a barrier dropped, a select's
//! branches swapped.
//!
//! The rules are syntactic; a mutant that does not compile is counted apart
//! by the campaign, not filtered here, so a rule that breaks the build shows.
//! Edits that cannot change the program or could only hang it are not made:
//! template brackets are not comparisons, the step of a loop is not flipped
//! (`++i` to `--i` is an infinite loop, not a numeric bug), shared-memory
//! array sizes are not resized.

use super::lex::{Kind, Token};
use serde::Serialize;

/// A rule, by the name the reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// `+` <-> `-`, `*` <-> `/` (binary), `+=` <-> `-=`.
    Arithmetic,
    /// `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`.
    Comparison,
    /// `&&` <-> `||`, binary `&` <-> `|`.
    Logic,
    /// An integer literal plus or minus one (bounds, indices, masks, shifts).
    OffByOne,
    /// A float constant one ulp up, or its zero of the other sign.
    Constant,
    /// A unary minus dropped.
    Sign,
    /// A correctly rounded intrinsic swapped: `__fdiv_rn` to `__fdividef`,
    /// rounding toward zero for nearest, the accurate exp to `__expf`.
    Intrinsic,
    /// `add(mul(a, b), c)` contracted into `__fmaf_rn(a, b, c)`.
    FmaContraction,
    /// `for (int i = a; i < b; ++i)` run from `b - 1` down to `a`.
    ReverseLoop,
    /// A shuffle's lane or offset argument `o` read as `o ^ 1`.
    Shuffle,
    /// A `__syncthreads()`, `__syncwarp()` or `__threadfence()` dropped.
    Barrier,
    /// `c ? a : b` -> `c ? b : a`.
    Select,
    /// `min` <-> `max` (and `fminf` <-> `fmaxf`, the warp reductions).
    MinMax,
}

impl Rule {
    pub const ALL: [Rule; 13] = [
        Rule::Arithmetic,
        Rule::Comparison,
        Rule::Logic,
        Rule::OffByOne,
        Rule::Constant,
        Rule::Sign,
        Rule::Intrinsic,
        Rule::FmaContraction,
        Rule::ReverseLoop,
        Rule::Shuffle,
        Rule::Barrier,
        Rule::Select,
        Rule::MinMax,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Rule::Arithmetic => "arithmetic",
            Rule::Comparison => "comparison",
            Rule::Logic => "logic",
            Rule::OffByOne => "off-by-one",
            Rule::Constant => "constant",
            Rule::Sign => "sign",
            Rule::Intrinsic => "intrinsic",
            Rule::FmaContraction => "fma-contraction",
            Rule::ReverseLoop => "reverse-loop",
            Rule::Shuffle => "shuffle",
            Rule::Barrier => "barrier",
            Rule::Select => "select",
            Rule::MinMax => "min-max",
        }
    }
}

/// One edit: replace `source[start..end]` by `replacement`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub rule: Rule,
    pub start: usize,
    pub end: usize,
    pub replacement: String,
}

/// Every edit the rules propose on `tokens` (of `src`), in source order.
pub fn edits(src: &str, tokens: &[Token]) -> Vec<Edit> {
    let mut out = Vec::new();
    let templates = template_brackets(tokens);
    let for_steps = for_step_ranges(tokens);
    let shared_lines: Vec<usize> =
        tokens.iter().filter(|t| t.text == "__shared__" || t.text == "__launch_bounds__").map(|t| t.line).collect();
    for (i, t) in tokens.iter().enumerate() {
        let one =
            |rule: Rule, replacement: &str| Edit { rule, start: t.start, end: t.end, replacement: replacement.into() };
        let binary = is_binary_position(tokens, i);
        match (t.kind, t.text.as_str()) {
            (Kind::Punct, "+") if binary => out.push(one(Rule::Arithmetic, "-")),
            (Kind::Punct, "-") if binary => out.push(one(Rule::Arithmetic, "+")),
            (Kind::Punct, "*") if binary && !is_declarator(tokens, i) => out.push(one(Rule::Arithmetic, "/")),
            (Kind::Punct, "/") if binary => out.push(one(Rule::Arithmetic, "*")),
            (Kind::Punct, "+=") if !in_any(&for_steps, i) => out.push(one(Rule::Arithmetic, "-=")),
            (Kind::Punct, "-=") if !in_any(&for_steps, i) => out.push(one(Rule::Arithmetic, "+=")),
            (Kind::Punct, "-") if !binary && tokens.get(i + 1).is_some_and(|n| n.kind != Kind::Number) => {
                out.push(one(Rule::Sign, ""))
            }
            (Kind::Punct, "<" | ">") if templates.contains(&i) => {}
            (Kind::Punct, "<") => out.push(one(Rule::Comparison, "<=")),
            (Kind::Punct, "<=") => out.push(one(Rule::Comparison, "<")),
            (Kind::Punct, ">") => out.push(one(Rule::Comparison, ">=")),
            (Kind::Punct, ">=") => out.push(one(Rule::Comparison, ">")),
            (Kind::Punct, "==") => out.push(one(Rule::Comparison, "!=")),
            (Kind::Punct, "!=") => out.push(one(Rule::Comparison, "==")),
            (Kind::Punct, "&&") => out.push(one(Rule::Logic, "||")),
            (Kind::Punct, "||") => out.push(one(Rule::Logic, "&&")),
            (Kind::Punct, "&") if binary && !is_declarator(tokens, i) => out.push(one(Rule::Logic, "|")),
            (Kind::Punct, "|") if binary => out.push(one(Rule::Logic, "&")),
            (Kind::Number, _) if !shared_lines.contains(&t.line) => out.extend(number_edits(tokens, i)),
            (Kind::Ident, name) => out.extend(ident_edits(src, tokens, i, name)),
            _ => {}
        }
    }
    out.extend(reverse_loops(tokens));
    out.extend(select_edits(src, tokens));
    out.sort_by_key(|e| (e.start, e.end));
    out
}

/// Whether token `i` (an operator) stands between two operands.
fn is_binary_position(tokens: &[Token], i: usize) -> bool {
    let Some(prev) = i.checked_sub(1).map(|p| &tokens[p]) else { return false };
    match prev.kind {
        Kind::Number => true,
        Kind::Ident => !matches!(prev.text.as_str(), "return" | "case" | "else" | "do"),
        Kind::Punct => matches!(prev.text.as_str(), ")" | "]"),
    }
}

/// Whether the `*` or `&` at `i` declares a pointer or reference
/// (`const float* x`, `float (&x)[V]`, `const Divisor& v`) rather than
/// multiplying: the token before it is a type, or the one after is a
/// qualifier.
fn is_declarator(tokens: &[Token], i: usize) -> bool {
    const TYPES: [&str; 13] = [
        "float", "int", "unsigned", "char", "void", "long", "double", "bool", "short", "uint4", "float4", "auto",
        "const",
    ];
    let prev = &tokens[i - 1].text;
    let next = tokens.get(i + 1).map(|t| t.text.as_str());
    TYPES.contains(&prev.as_str())
        || prev.chars().next().is_some_and(char::is_uppercase)
        || matches!(next, Some("__restrict__" | "const" | ")"))
}

/// The indices of `<` and `>` tokens that bracket template arguments
/// (`load_row<V>(`, `template <int V, bool FULL>`, `static_cast<unsigned>(`):
/// a `<` after an identifier whose `>` follows within a few plain tokens,
/// and is itself followed by `(`, `::`, `{` or a name.
fn template_brackets(tokens: &[Token]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.text != "<" || i == 0 || tokens[i - 1].kind != Kind::Ident {
            continue;
        }
        let mut depth = 0;
        for (j, u) in tokens.iter().enumerate().skip(i + 1).take(12) {
            match u.text.as_str() {
                "<" => depth += 1,
                ">" if depth > 0 => depth -= 1,
                ">" => {
                    let after = tokens.get(j + 1).map(|a| (a.kind, a.text.as_str()));
                    if matches!(after, Some((Kind::Ident, _)) | Some((_, "(" | "::" | "{" | ">" | ","))) {
                        out.extend([i, j]);
                    }
                    break;
                }
                "," | "::" => {}
                _ if u.kind != Kind::Punct => {}
                _ => break,
            }
        }
    }
    out
}

/// The token ranges of every `for` header's step clause (after its second
/// `;`), whose `+=` is not flipped.
fn for_step_ranges(tokens: &[Token]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.text != "for" || tokens.get(i + 1).is_none_or(|p| p.text != "(") {
            continue;
        }
        if let Some(close) = matching(tokens, i + 1) {
            let semis: Vec<usize> = (i + 2..close).filter(|&j| tokens[j].text == ";").collect();
            if let Some(&s) = semis.get(1) {
                out.push((s, close));
            }
        }
    }
    out
}

fn in_any(ranges: &[(usize, usize)], i: usize) -> bool {
    ranges.iter().any(|&(a, b)| a < i && i < b)
}

/// The index of the `)`, `]` or `}` matching the opener at `open`.
fn matching(tokens: &[Token], open: usize) -> Option<usize> {
    let (o, c) = match tokens.get(open)?.text.as_str() {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        "{" => ("{", "}"),
        _ => return None,
    };
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        if t.text == o {
            depth += 1;
        } else if t.text == c {
            depth -= 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
    None
}

/// An integer literal plus and minus one; a float literal one ulp up, and
/// `0.0f` as `-0.0f` (a `-0.0f` as `0.0f`).
fn number_edits(tokens: &[Token], i: usize) -> Vec<Edit> {
    let t = &tokens[i];
    let edit = |rule, start, replacement: String| Edit { rule, start, end: t.end, replacement };
    if let Some((value, suffix, hex)) = parse_int(&t.text) {
        let fmt = |v: u64| if hex { format!("{v:#x}{suffix}") } else { format!("{v}{suffix}") };
        let mut out = Vec::new();
        if value < u32::MAX as u64 {
            out.push(edit(Rule::OffByOne, t.start, fmt(value + 1)));
        }
        if value > 0 {
            out.push(edit(Rule::OffByOne, t.start, fmt(value - 1)));
        }
        return out;
    }
    let Some(x) = parse_float(&t.text) else { return Vec::new() };
    let negated = i > 0 && tokens[i - 1].text == "-" && !is_binary_position(tokens, i - 1);
    let mut out = vec![edit(Rule::Constant, t.start, hex_float(f32::from_bits(x.to_bits() + 1)))];
    if x == 0.0 {
        if negated {
            out.push(edit(Rule::Constant, tokens[i - 1].start, "0.0f".into()));
        } else {
            out.push(edit(Rule::Constant, t.start, "-0.0f".into()));
        }
    }
    out
}

/// A decimal or hex integer literal: its value, suffix, and base.
fn parse_int(text: &str) -> Option<(u64, &str, bool)> {
    let digits_end = text.find(['u', 'U', 'l', 'L']).unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|v| (v, suffix, true));
    }
    digits.parse().ok().map(|v| (v, suffix, false))
}

/// A float literal (`1.0f`, `1e-20f`, `86.0f`) as the f32 it denotes.
fn parse_float(text: &str) -> Option<f32> {
    let body = text.strip_suffix(['f', 'F']).unwrap_or(text);
    if body.starts_with("0x") || body.starts_with("0X") {
        return None;
    }
    body.parse::<f32>().ok().filter(|x| x.is_finite() && *x >= 0.0)
}

/// A C++17 hex float literal of `x` (exact).
fn hex_float(x: f32) -> String {
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0 {
        return format!("0x0.{:06x}p-126f", man << 1);
    }
    format!("0x1.{:06x}p{:+}f", man << 1, exp - 127)
}

/// The rules that read a called name: intrinsics, min/max, shuffles,
/// barriers, FMA contraction.
fn ident_edits(src: &str, tokens: &[Token], i: usize, name: &str) -> Vec<Edit> {
    let t = &tokens[i];
    let one =
        |rule: Rule, replacement: &str| Edit { rule, start: t.start, end: t.end, replacement: replacement.into() };
    let call = tokens.get(i + 1).is_some_and(|n| n.text == "(");
    let mut out = Vec::new();
    if !call {
        return out;
    }
    let qualified = i >= 2 && tokens[i - 1].text == "::";
    let swap = match name {
        "__fdiv_rn" => Some("__fdividef"),
        "__fadd_rn" => Some("__fadd_rz"),
        "__fmul_rn" => Some("__fmul_rz"),
        "__fmaf_rn" => Some("__fmaf_rz"),
        "__frcp_rn" => Some("__frcp_rz"),
        "__fsqrt_rn" => Some("__fsqrt_rz"),
        "expf" | "exp_cr" | "exp_ref" => Some("__expf"),
        _ => None,
    };
    if let Some(s) = swap {
        // A qualified call (`exp_detail::exp_ref`) is replaced whole.
        let start = if qualified { tokens[i - 2].start } else { t.start };
        out.push(Edit { rule: Rule::Intrinsic, start, end: t.end, replacement: s.into() });
    }
    let minmax = match name {
        "min" => Some("max"),
        "max" => Some("min"),
        "fminf" => Some("fmaxf"),
        "fmaxf" => Some("fminf"),
        "__reduce_min_sync" => Some("__reduce_max_sync"),
        "__reduce_max_sync" => Some("__reduce_min_sync"),
        _ => None,
    };
    if let (Some(s), false) = (minmax, qualified) {
        out.push(one(Rule::MinMax, s));
    }
    let args = || call_args(tokens, i + 1);
    if matches!(name, "__shfl_xor_sync" | "__shfl_sync" | "__shfl_up_sync" | "__shfl_down_sync") {
        if let Some(a) = args().filter(|a| a.len() >= 3) {
            let (s, e) = a[2];
            let arg = &src[tokens[s].start..tokens[e - 1].end];
            out.push(Edit {
                rule: Rule::Shuffle,
                start: tokens[s].start,
                end: tokens[e - 1].end,
                replacement: format!("(({arg}) ^ 1)"),
            });
        }
    }
    if matches!(name, "__syncthreads" | "__syncwarp" | "__threadfence") {
        if let Some(close) = matching(tokens, i + 1) {
            if tokens.get(close + 1).is_some_and(|s| s.text == ";") {
                out.push(Edit {
                    rule: Rule::Barrier,
                    start: t.start,
                    end: tokens[close + 1].end,
                    replacement: ";".into(),
                });
            }
        }
    }
    if is_name(name, tokens, i, ["add", "__fadd_rn"]) {
        out.extend(fma_contraction(src, tokens, i));
    }
    out
}

/// Whether token `i` calls one of `names` (unqualified or `bp::`).
fn is_name<const N: usize>(name: &str, tokens: &[Token], i: usize, names: [&str; N]) -> bool {
    names.contains(&name) && (i < 2 || tokens[i - 1].text != "::" || tokens[i - 2].text == "bp")
}

/// The token ranges `[start, end)` of the arguments of the call whose `(` is
/// at `open`.
fn call_args(tokens: &[Token], open: usize) -> Option<Vec<(usize, usize)>> {
    let close = matching(tokens, open)?;
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = open + 1;
    for (j, t) in tokens.iter().enumerate().take(close).skip(open + 1) {
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                out.push((start, j));
                start = j + 1;
            }
            _ => {}
        }
    }
    if start < close {
        out.push((start, close));
    }
    Some(out)
}

/// `add(mul(a, b), c)` or `add(c, mul(a, b))` (`bp::` or the `__f*_rn`
/// intrinsics) as `__fmaf_rn(a, b, c)`: one rounding instead of two, the
/// contraction `--fmad=false` forbids.
fn fma_contraction(src: &str, tokens: &[Token], i: usize) -> Vec<Edit> {
    let Some(args) = call_args(tokens, i + 1).filter(|a| a.len() == 2) else { return Vec::new() };
    let close = matching(tokens, i + 1).unwrap_or(i + 1);
    let start = if i >= 2 && tokens[i - 1].text == "::" { tokens[i - 2].start } else { tokens[i].start };
    let text = |(s, e): (usize, usize)| src[tokens[s].start..tokens[e - 1].end].to_string();
    let product = |(s, e): (usize, usize)| {
        // The argument is exactly one call of mul.
        let mut m = s;
        if tokens.get(m + 1).is_some_and(|t| t.text == "::") && tokens[m].text == "bp" {
            m += 2;
        }
        if !matches!(tokens.get(m).map(|t| t.text.as_str()), Some("mul" | "__fmul_rn")) {
            return None;
        }
        let inner = call_args(tokens, m + 1).filter(|a| a.len() == 2)?;
        (matching(tokens, m + 1)? + 1 == e).then(|| (text(inner[0]), text(inner[1])))
    };
    let mut out = Vec::new();
    for (p, other) in [(args[0], args[1]), (args[1], args[0])] {
        if let Some((a, b)) = product(p) {
            out.push(Edit {
                rule: Rule::FmaContraction,
                start,
                end: tokens[close].end,
                replacement: format!("__fmaf_rn({a}, {b}, {})", text(other)),
            });
        }
    }
    out
}

/// `for (int i = a; i < b; ++i)` (or `i++`, `i += 1`) as
/// `for (int i = (b) - 1; i >= (a); --i)`: the same iterations in reverse, so
/// a serial reduction sums in the other order.
fn reverse_loops(tokens: &[Token]) -> Vec<Edit> {
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.text != "for" || tokens.get(i + 1).is_none_or(|p| p.text != "(") {
            continue;
        }
        let Some(close) = matching(tokens, i + 1) else { continue };
        let h: Vec<&str> = tokens[i + 2..close].iter().map(|t| t.text.as_str()).collect();
        // int V = A ; V < B ; step
        let Some(s1) = h.iter().position(|&x| x == ";") else { continue };
        let Some(s2) = h[s1 + 1..].iter().position(|&x| x == ";").map(|p| p + s1 + 1) else { continue };
        if h.len() < 4 || !matches!(h[0], "int") || h[2] != "=" {
            continue;
        }
        let v = h[1];
        let (a, cond, step) = (&h[3..s1], &h[s1 + 1..s2], &h[s2 + 1..]);
        if cond.len() < 3 || cond[0] != v || cond[1] != "<" {
            continue;
        }
        let b = &cond[2..];
        let unit = matches!(step, [x, "++"] | ["++", x] if *x == v) || step == [v, "+=", "1"];
        if !unit || a.is_empty() {
            continue;
        }
        let join = |xs: &[&str]| xs.join(" ");
        out.push(Edit {
            rule: Rule::ReverseLoop,
            start: tokens[i + 2].start,
            end: tokens[close - 1].end,
            replacement: format!("int {v} = ({}) - 1; {v} >= ({}); --{v}", join(b), join(a)),
        });
    }
    out
}

/// `c ? a : b` as `c ? b : a`, for every `?` of the source: the branches
/// run to the `:` at the same depth and from it to the end of the
/// expression (`,`, `;` or a closing bracket at depth 0).
fn select_edits(src: &str, tokens: &[Token]) -> Vec<Edit> {
    let mut out = Vec::new();
    for (q, t) in tokens.iter().enumerate() {
        if t.text != "?" {
            continue;
        }
        let (mut depth, mut nested) = (0i32, 0i32);
        let mut colon = None;
        let mut end = None;
        for (j, u) in tokens.iter().enumerate().skip(q + 1) {
            match u.text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" if depth == 0 => {
                    end = Some(j);
                    break;
                }
                ")" | "]" | "}" => depth -= 1,
                "?" if depth == 0 => nested += 1,
                ":" if depth == 0 && nested > 0 => nested -= 1,
                ":" if depth == 0 && colon.is_none() => colon = Some(j),
                "," | ";" if depth == 0 => {
                    end = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let (Some(c), Some(e)) = (colon, end) else { continue };
        if c == q + 1 || e == c + 1 {
            continue;
        }
        let a = &src[tokens[q + 1].start..tokens[c - 1].end];
        let b = &src[tokens[c + 1].start..tokens[e - 1].end];
        out.push(Edit {
            rule: Rule::Select,
            start: tokens[q + 1].start,
            end: tokens[e - 1].end,
            replacement: format!("{b} : {a}"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::lex::tokens;
    use super::*;

    fn apply(src: &str, e: &Edit) -> String {
        format!("{}{}{}", &src[..e.start], e.replacement, &src[e.end..])
    }

    fn all(src: &str) -> Vec<(Rule, String)> {
        edits(src, &tokens(src)).iter().map(|x| (x.rule, apply(src, x))).collect()
    }

    fn has(src: &str, rule: Rule, want: &str) -> bool {
        all(src).iter().any(|(r, s)| *r == rule && s == want)
    }

    #[test]
    fn operators_swap_where_binary_only() {
        let src = "y = -a * b + c;";
        let m = all(src);
        assert!(has(src, Rule::Arithmetic, "y = -a / b + c;"));
        assert!(has(src, Rule::Arithmetic, "y = -a * b - c;"));
        assert!(has(src, Rule::Sign, "y = a * b + c;"));
        assert!(!m.iter().any(|(_, s)| s == "y = +a * b + c;"), "{m:?}");
    }

    #[test]
    fn pointers_and_templates_are_left_alone() {
        let src = "const float* __restrict__ p = q; f<V>(x); template <int V, bool F> g(); if (a < b) c;";
        let m = all(src);
        assert!(!m.iter().any(|(r, _)| *r == Rule::Arithmetic), "{m:?}");
        let cmp: Vec<&String> = m.iter().filter(|(r, _)| *r == Rule::Comparison).map(|(_, s)| s).collect();
        assert_eq!(cmp, ["const float* __restrict__ p = q; f<V>(x); template <int V, bool F> g(); if (a <= b) c;"]);
    }

    #[test]
    fn literals_off_by_one_and_ulp() {
        assert!(has("x[i + 31u]", Rule::OffByOne, "x[i + 32u]"));
        assert!(has("m & 0x1fu", Rule::OffByOne, "m & 0x1eu"));
        assert!(has("a = 1.0f;", Rule::Constant, "a = 0x1.000002p+0f;"));
        assert!(has("a = 0.0f;", Rule::Constant, "a = -0.0f;"));
        assert!(has("a = -0.0f;", Rule::Constant, "a = 0.0f;"));
        // Hex floats parse back to the next float up.
        assert_eq!(hex_float(f32::from_bits(0x3f80_0001)), "0x1.000002p+0f");
        assert_eq!(hex_float(f32::from_bits(1)), "0x0.000002p-126f");
    }

    #[test]
    fn intrinsics_barriers_shuffles_minmax() {
        assert!(has("q = __fdiv_rn(a, b);", Rule::Intrinsic, "q = __fdividef(a, b);"));
        assert!(has("y = exp_detail::exp_ref(-x);", Rule::Intrinsic, "y = __expf(-x);"));
        assert!(has("a; __syncthreads(); b;", Rule::Barrier, "a; ; b;"));
        assert!(has("v = __shfl_xor_sync(M, x, o);", Rule::Shuffle, "v = __shfl_xor_sync(M, x, ((o) ^ 1));"));
        assert!(has("m = min(a, b);", Rule::MinMax, "m = max(a, b);"));
    }

    #[test]
    fn fma_contraction_both_operand_orders() {
        assert!(has("r = add(mul(a, b[i]), c);", Rule::FmaContraction, "r = __fmaf_rn(a, b[i], c);"));
        assert!(has("r = bp::add(c, bp::mul(a, b));", Rule::FmaContraction, "r = __fmaf_rn(a, b, c);"));
        assert!(!all("r = add(mul(a, b) + 1, c);").iter().any(|(r, _)| *r == Rule::FmaContraction));
    }

    #[test]
    fn loops_reverse_and_steps_do_not_flip() {
        let src = "for (int j = 0; j < V; ++j) acc += x[j];";
        assert!(has(src, Rule::ReverseLoop, "for (int j = (V) - 1; j >= (0); --j) acc += x[j];"));
        let src = "for (int i = t; i < n; i += 32) s -= 1;";
        let m = all(src);
        assert!(m.iter().any(|(_, s)| s == "for (int i = t; i < n; i += 32) s += 1;"));
        assert!(!m.iter().any(|(_, s)| s.contains("i -= 32")), "{m:?}");
        assert!(!m.iter().any(|(r, _)| *r == Rule::ReverseLoop));
    }

    #[test]
    fn selects_swap_their_branches() {
        assert!(has("x = c ? a : f(b, d);", Rule::Select, "x = c ? f(b, d) : a;"));
        assert!(has("g(c ? a : b, e);", Rule::Select, "g(c ? b : a, e);"));
        assert!(has("x = c ? (d ? 1 : 2) : 3;", Rule::Select, "x = c ? 3 : (d ? 1 : 2);"));
    }
}
