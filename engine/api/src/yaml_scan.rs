//! A linear pre-scan of YAML text for flow-collection nesting (`[[[…` / `{{{…`).
//!
//! libyaml's (and so serde_yaml's) cost is quadratic in flow nesting: a 120 KB document of
//! brackets stalls a parser for seconds. Readers of untrusted YAML (the API server's request
//! bodies, the CLI's input files) call [`flow_too_deep`] before parsing. The scan over-approximates
//! the scanner's flow level, never under-counts it, so a deep document cannot hide behind quotes,
//! comments or plain scalars.

// The states libyaml's scanner can be in, as bits of a set.
/// Between tokens.
const TOK: u16 = 1;
/// In a plain scalar (or a block scalar's text).
const PLAIN: u16 = 1 << 1;
/// In an anchor or alias name.
const NAME: u16 = 1 << 2;
/// In a double-quoted scalar.
const DQ: u16 = 1 << 3;
/// After a backslash in a double-quoted scalar.
const DQ_ESC: u16 = 1 << 4;
/// In a single-quoted scalar.
const SQ: u16 = 1 << 5;
/// On the second quote of `''` in a single-quoted scalar.
const SQ_ESC: u16 = 1 << 6;
/// In a comment or a directive.
const COMMENT: u16 = 1 << 7;
/// In a tag.
const TAG: u16 = 1 << 8;
/// States where a bracket is (or, for a tag, may be) text.
const TEXT: u16 = DQ | DQ_ESC | SQ | SQ_ESC | COMMENT | TAG;

fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

fn is_break(c: u8) -> bool {
    c == b'\n' || c == b'\r'
}

fn is_flow(c: u8) -> bool {
    matches!(c, b',' | b'[' | b']' | b'{' | b'}')
}

/// What is known of the scanner's context: `Some(true)` in a flow collection, `Some(false)` in
/// a block, `None` unknown.
type Flow = Option<bool>;

/// The states after byte `c` from state `state`; `prev`/`next` are the neighbouring bytes
/// (`None` at either end).
fn yaml_step(state: u16, c: u8, prev: Option<u8>, next: Option<u8>, flow: Flow) -> u16 {
    // What is an indicator in a flow collection is text in a block.
    let either = match flow {
        Some(true) => TOK,
        Some(false) => PLAIN,
        None => TOK | PLAIN,
    };
    let blank_next = next.is_none_or(|n| is_blank(n) || is_break(n));
    match state {
        TOK => match c {
            _ if is_blank(c) || is_break(c) => TOK,
            b'#' => COMMENT,
            b'"' => DQ,
            b'\'' => SQ,
            b'!' => TAG,
            b'&' | b'*' => NAME,
            _ if is_flow(c) => TOK,
            b'-' if blank_next => TOK,
            b'?' | b':' if blank_next => TOK,
            b'?' | b':' => either,
            _ => PLAIN,
        },
        PLAIN => match c {
            b'#' if prev.is_none_or(|p| is_blank(p) || is_break(p)) => COMMENT,
            b':' if blank_next => TOK,
            b':' if next.is_some_and(is_flow) => either,
            _ if is_flow(c) => either,
            // May end the scalar, or continue it on the next line.
            _ if is_break(c) => TOK | PLAIN,
            _ => PLAIN,
        },
        NAME if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' => NAME,
        NAME => yaml_step(TOK, c, prev, next, flow),
        DQ => match c {
            b'\\' => DQ_ESC,
            b'"' => TOK,
            _ => DQ,
        },
        DQ_ESC => DQ,
        SQ if c == b'\'' && next == Some(b'\'') => SQ_ESC,
        SQ if c == b'\'' => TOK,
        SQ | SQ_ESC => SQ,
        COMMENT if is_break(c) => TOK,
        COMMENT => COMMENT,
        TAG if is_blank(c) || is_break(c) => TOK,
        TAG if is_flow(c) => TAG | TOK,
        _ => TAG,
    }
}

/// The line (1-based) where flow collections (`[…]`, `{…}`) of the YAML document `src` may nest
/// deeper than `limit`, or `None`.
///
/// libyaml's scanner re-checks every open flow collection on every token, so its cost is
/// quadratic in their nesting (a 120 KB `a: [[[…` took 25 s). This linear scan runs first. It
/// follows the scanner as the set of states it may be in (quoted scalars, comments, tags, plain
/// scalars — ambiguity only adds states), counts an opening bracket wherever one may open a
/// collection, and a closing one only where it certainly closes one, or where it matches an
/// opening bracket counted since the last quote, comment or line break. Its count is therefore
/// never below the scanner's: a deep document cannot hide behind quotes.
pub fn flow_too_deep(src: &[u8], limit: usize) -> Option<usize> {
    let mut states = TOK;
    // `level` bounds the scanner's flow level from above, `lower` from below; `inner` counts the
    // brackets `level` counted since the scanner last may have switched between text and tokens.
    let (mut level, mut lower, mut inner) = (0usize, 0usize, 0usize);
    let (mut line, mut line_start) = (1usize, 0usize);
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        if i == line_start && states & (TOK | PLAIN) != 0 {
            let rest = &src[i..];
            if rest.starts_with(b"\xEF\xBB\xBF") {
                i += 3;
                line_start = i;
                continue;
            }
            // A document marker ends whatever was open (or is an error inside a quoted scalar).
            let marker = rest.starts_with(b"---") || rest.starts_with(b"...");
            if marker && rest.get(3).is_none_or(|&n| is_blank(n) || is_break(n)) {
                (states, i) = (TOK, i + 3);
                continue;
            }
            if c == b'%' {
                states |= COMMENT;
            }
        }
        let flow = if lower > 0 {
            Some(true)
        } else if level == 0 {
            Some(false)
        } else {
            None
        };
        // Where the scanner may switch between text and tokens, brackets counted before no
        // longer match brackets after.
        let tag_end = states & TAG != 0 && (is_blank(c) || is_flow(c));
        if matches!(c, b'"' | b'\'' | b'#' | b'!') || is_break(c) || tag_end {
            inner = 0;
        }
        let opens_certainly = states & !(TOK | NAME) == 0
            || (states & !(TOK | NAME | PLAIN) == 0 && flow == Some(true));
        match c {
            b'[' | b'{'
                if states & (TOK | NAME | TAG) != 0 || (states & PLAIN != 0 && level > 0) =>
            {
                level += 1;
                inner += 1;
                lower += usize::from(opens_certainly);
                if level > limit {
                    return Some(line);
                }
            }
            b']' | b'}' => {
                if states & TEXT == 0 || inner > 0 {
                    level = level.saturating_sub(1);
                    inner = inner.saturating_sub(1);
                }
                if states & !(DQ | DQ_ESC | SQ | SQ_ESC | COMMENT) != 0 {
                    lower = lower.saturating_sub(1);
                }
            }
            _ => {}
        }
        let prev = i.checked_sub(1).map(|p| src[p]);
        let next = src.get(i + 1).copied();
        let mut after = 0;
        for bit in (0..9).map(|b| 1u16 << b).filter(|b| states & b != 0) {
            after |= yaml_step(bit, c, prev, next, flow);
        }
        states = after;
        if is_break(c) {
            // A line may end a block scalar or a multi-line plain scalar: the next may start a token.
            states |= TOK;
            if c == b'\n' || next != Some(b'\n') {
                line += 1;
            }
            line_start = i + 1;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Nesting depth of a decoded value (scalars 0).
    fn depth(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn yaml_prescan_follows_quotes_comments_and_plain_scalars() {
        let deep = |d: usize| format!("a: {}{}", "[".repeat(d), "]".repeat(d));
        assert_eq!(flow_too_deep(deep(3).as_bytes(), 3), None);
        assert_eq!(flow_too_deep(deep(4).as_bytes(), 3), Some(1));
        // Brackets that are text: in quoted scalars, comments, plain scalars. (A block scalar's
        // text is scanned as if it were flow: balanced brackets pass, unbalanced ones count.)
        let text =
            "a: \"[[[[\"\nb: '{{{{'\n# [[[[\nc: |\n  {\"x\": [[\n  ]]}\nd: x[[[[ y\ne: it's [[[[\n";
        assert_eq!(flow_too_deep(text.as_bytes(), 3), None);
        // Real flow collections, spread over lines and around quoted scalars, close.
        let flow = "a: [[1,\n  [\"]\", '}', {b: c}]]]\nb: [[[x]]]\n".repeat(50);
        assert_eq!(flow_too_deep(flow.as_bytes(), 4), None);
        assert_eq!(flow_too_deep(flow.as_bytes(), 3), Some(2));
        // Closing brackets inside quotes do not close anything.
        let hidden = format!("a: {}", "[ \"]\", ".repeat(4));
        assert_eq!(flow_too_deep(hidden.as_bytes(), 3), Some(1));
        let hidden = format!("a: {}", "{ '}': ".repeat(4));
        assert_eq!(flow_too_deep(hidden.as_bytes(), 3), Some(1));
        // A quote that may start a quoted scalar (or be text) cannot hide what follows it.
        for prefix in [
            "a: x \"y\nb: ",
            "a: |\n  \"y\nb: ",
            "a: !t[\"\nb: ",
            "a: 'x''\nb: ",
            "a: &x\"\nb: ",
        ] {
            let src = format!("{prefix}{}", "[ \"]\", ".repeat(4));
            assert_eq!(
                flow_too_deep(src.as_bytes(), 3),
                Some(prefix.matches('\n').count() + 1),
                "{prefix:?}"
            );
        }
    }

    /// Random flow documents with adversarial scalars, comments and line breaks, after prefixes
    /// that leave a quote the scan cannot place: wherever serde_yaml decodes one, the scan's
    /// bound is at least its nesting.
    #[test]
    fn yaml_prescan_never_counts_below_the_parser() {
        fn text(r: &mut dyn FnMut(u64) -> u64, alphabet: &[u8]) -> String {
            (0..r(6))
                .map(|_| char::from(alphabet[r(alphabet.len() as u64) as usize]))
                .collect()
        }
        fn gap(r: &mut dyn FnMut(u64) -> u64) -> String {
            match r(8) {
                0 => " ".into(),
                1 => "\n  ".into(),
                2 => format!(" #{}\n ", text(r, b"[]{}\"' a#")),
                _ => String::new(),
            }
        }
        fn node(r: &mut dyn FnMut(u64) -> u64, depth: usize) -> String {
            if depth < 6 && r(3) > 0 {
                let (open, close) = if r(2) == 0 { ("[", "]") } else { ("{", "}") };
                let items: Vec<String> = (0..r(4))
                    .map(|_| format!("{}{}{}", gap(r), node(r, depth + 1), gap(r)))
                    .collect();
                format!("{open}{}{}{close}", gap(r), items.join(","))
            } else {
                match r(4) {
                    0 => format!("\"{}\"", text(r, b"[]{}' a#\n").replace('\n', "\\n")),
                    1 => format!("'{}'", text(r, b"[]{}\" a#").replace('\'', "''")),
                    2 => format!("'{}''{}'", text(r, b"[]{}\" "), text(r, b"[]{}\" ")),
                    _ => format!("a{}", text(r, b"\"'a# ")),
                }
            }
        }
        let mut seed: u64 = 0x1234_5678_9ABC_DEF1;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let prefixes = [
            "",
            "k: ",
            "- ",
            "k: x \"y\nz: ",
            "k: |\n  \"[[\n  '{\nz: ",
            "k: it's\n  \"q\nz: ",
        ];
        let mut decoded = 0;
        for _ in 0..20_000 {
            let prefix = prefixes[rnd(prefixes.len() as u64) as usize];
            let src = format!("{prefix}{}", node(&mut rnd, 0));
            let Ok(v) = serde_yaml::from_str::<Value>(&src) else {
                continue;
            };
            decoded += 1;
            let nests = depth(&v).saturating_sub(usize::from(!prefix.is_empty()));
            let bound = (0..64)
                .find(|&l| flow_too_deep(src.as_bytes(), l).is_none())
                .unwrap_or(64);
            assert!(bound >= nests, "{src:?}: nests {nests}, scan bound {bound}");
        }
        assert!(decoded > 5_000, "only {decoded} documents decoded");
    }
}
