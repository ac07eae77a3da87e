//! A cheap pre-scan of an expression's text, run before the parser sees it.
//!
//! The CEL parser, the type checker and the interpreter all recurse once per level of the syntax
//! tree, and a chain of binary operators (`1+1+…`), members (`a.b.c…`) or `in`s nests one level
//! per term without a single bracket. The scan tokenizes the text (skipping string literals and
//! comments) and computes an upper bound of the tree's depth, so that text whose tree could be
//! too deep is refused with its position before any recursion starts.
//!
//! **The bound.** Every node of the tree comes from a token: an operator, a `.`, a bracket group
//! (call, index, list, map, parentheses) or a leaf. Along any path from the root, the nodes of
//! one bracket group's argument are distinct operator or `.` tokens of that argument, then the
//! path enters at most one nested group of that argument. So the depth of an argument is at most
//! its operator count plus one plus the depth of its deepest nested group, and a group's depth is
//! the maximum over its arguments. Macros (`all`, `exists`, `map`, …) expand into a few extra
//! levels per call; [`MACRO_LEVELS`] is charged for every call to keep the bound an upper bound.
//!
//! **String literals.** A literal is skipped only when it is well-formed as the CEL lexer reads
//! it (terminated, no line break in a single-quoted form, valid escapes, the exact prefixes `r`,
//! `b`, `br` in either case). Anything else is scanned as code, which can only raise the bound.

use thiserror::Error;

/// Extra levels charged per bracket group for macro expansion (a comprehension's loop step and
/// its accumulator call sit between the call and its arguments).
pub const MACRO_LEVELS: usize = 3;

/// Why the pre-scan refused an expression. Columns are 1-based character positions; the message
/// leaves them out (the engine prefixes them as it does for every positioned error).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScanError {
    /// Brackets nest deeper than the limit.
    #[error("expression nests deeper than {limit} levels")]
    Nesting {
        /// Where the limit was passed.
        column: usize,
        /// The limit.
        limit: usize,
    },
    /// The syntax tree could be deeper than the limit.
    #[error(
        "expression is too deeply nested (operators, members, calls and brackets \
         chained deeper than the limit of {limit} levels); split it or use a macro such as `all`"
    )]
    Depth {
        /// Where the limit was passed.
        column: usize,
        /// The limit.
        limit: usize,
    },
}

impl ScanError {
    /// The 1-based column the error is at.
    pub fn column(&self) -> usize {
        match self {
            ScanError::Nesting { column, .. } | ScanError::Depth { column, .. } => *column,
        }
    }
}

/// One open bracket group.
#[derive(Debug, Default, Clone, Copy)]
struct Frame {
    /// Deepest finished argument of this group.
    best: usize,
    /// Operator and member tokens in the current argument.
    ops: usize,
    /// Deepest closed group within the current argument.
    child: usize,
}

/// Checks `source` against `max_nesting` (brackets) and `max_depth` (the depth bound described in
/// the module documentation). Linear in the text; allocation bounded by `max_nesting`.
///
/// # Errors
/// The first position where a limit is passed.
pub fn check(source: &str, max_nesting: usize, max_depth: usize) -> Result<(), ScanError> {
    let chars: Vec<char> = source.chars().collect();
    let mut stack: Vec<Frame> = vec![Frame::default()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let next = chars.get(i + 1).copied();
        let mut grew = false;
        match c {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\'' | '"' => {
                if let Some(end) = string_end(&chars, i, false) {
                    i = end;
                    continue;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if word == "in" {
                    grew = bump(&mut stack);
                } else if let Some(raw) = string_prefix(&word)
                    && matches!(chars.get(i), Some('\'' | '"'))
                    && let Some(end) = string_end(&chars, i, raw)
                {
                    i = end;
                    continue;
                }
                if grew {
                    depth_check(&stack, column, max_depth)?;
                }
                continue;
            }
            c if c.is_ascii_digit() => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                {
                    i += 1;
                    while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                    if chars[i - 1].eq_ignore_ascii_case(&'e')
                        && matches!(chars.get(i), Some('+' | '-'))
                    {
                        i += 1;
                        while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                            i += 1;
                        }
                    }
                }
                continue;
            }
            '(' | '[' | '{' => {
                if stack.len() > max_nesting {
                    return Err(ScanError::Nesting {
                        column,
                        limit: max_nesting,
                    });
                }
                stack.push(Frame::default());
            }
            ')' | ']' | '}' => {
                // An unbalanced closer is a syntax error the parser reports; it closes nothing.
                if stack.len() > 1
                    && let Some(f) = stack.pop()
                {
                    let depth = f.best.max(f.ops + f.child) + 1 + MACRO_LEVELS;
                    if let Some(parent) = stack.last_mut() {
                        parent.child = parent.child.max(depth);
                    }
                    grew = true;
                }
            }
            ',' => {
                if let Some(f) = stack.last_mut() {
                    f.best = f.best.max(f.ops + f.child);
                    f.ops = 0;
                    f.child = 0;
                }
            }
            '+' | '-' | '*' | '/' | '%' | '?' | '.' => grew = bump(&mut stack),
            '<' | '>' | '!' | '=' => {
                // `<=`, `>=`, `!=`, `==` are one token.
                if next == Some('=') {
                    i += 1;
                }
                grew = bump(&mut stack);
            }
            '&' | '|' => {
                // `&&`, `||` are one token; a lone one is a syntax error, counted anyway.
                if next == Some(c) {
                    i += 1;
                }
                grew = bump(&mut stack);
            }
            _ => {}
        }
        if grew {
            depth_check(&stack, column, max_depth)?;
        }
        i += 1;
    }
    Ok(())
}

/// Counts one operator or member token in the innermost group.
fn bump(stack: &mut [Frame]) -> bool {
    if let Some(f) = stack.last_mut() {
        f.ops += 1;
    }
    true
}

/// The depth bound of the text so far (every open group counts as at least as deep as what it
/// holds so far), against `limit`.
fn depth_check(stack: &[Frame], column: usize, limit: usize) -> Result<(), ScanError> {
    let mut inner: Option<usize> = None;
    for f in stack.iter().rev() {
        let child = match inner {
            Some(d) => f.child.max(d + 1 + MACRO_LEVELS),
            None => f.child,
        };
        inner = Some(f.best.max(f.ops + child));
    }
    if inner.unwrap_or(0) > limit {
        return Err(ScanError::Depth { column, limit });
    }
    Ok(())
}

/// Whether `word` is a string prefix the CEL lexer accepts (`r`, `b`, `br`, any case), and if so
/// whether the string is raw.
fn string_prefix(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "r" | "br" => Some(true),
        "b" => Some(false),
        _ => None,
    }
}

/// The index just past the string literal whose opening quote is at `start`, when the literal is
/// well-formed; `None` otherwise (the caller then scans its text as code).
fn string_end(chars: &[char], start: usize, raw: bool) -> Option<usize> {
    let q = chars[start];
    let triple = chars.get(start + 1) == Some(&q) && chars.get(start + 2) == Some(&q);
    if triple {
        let mut i = start + 3;
        while i < chars.len() {
            if chars[i] == q && chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                return Some(i + 3);
            }
            if chars[i] == '\\' && !raw {
                i += escape_len(chars, i)?;
            } else {
                i += 1;
            }
        }
        return None;
    }
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            c if c == q => return Some(i + 1),
            '\n' | '\r' => return None,
            '\\' if !raw => i += escape_len(chars, i)?,
            _ => i += 1,
        }
    }
    None
}

/// The length of the valid escape sequence at `i` (a backslash), or `None` if it is not one.
fn escape_len(chars: &[char], i: usize) -> Option<usize> {
    let hex = |from: usize, n: usize| {
        (from..from + n).all(|k| chars.get(k).is_some_and(char::is_ascii_hexdigit))
    };
    match chars.get(i + 1)? {
        'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '"' | '\'' | '\\' | '?' | '`' => Some(2),
        'x' | 'X' if hex(i + 2, 2) => Some(4),
        'u' if hex(i + 2, 4) => Some(6),
        'U' if hex(i + 2, 8) => Some(10),
        '0'..='3'
            if chars.get(i + 2).is_some_and(|c| ('0'..='7').contains(c))
                && chars.get(i + 3).is_some_and(|c| ('0'..='7').contains(c)) =>
        {
            Some(4)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(source: &str) -> usize {
        (0..10_000)
            .find(|&d| check(source, 1_000, d).is_ok())
            .unwrap_or(usize::MAX)
    }

    #[test]
    fn chains_of_operators_members_and_in_count_one_level_per_term() {
        assert_eq!(depth("1"), 0);
        assert_eq!(depth("1 + 1 + 1"), 2);
        assert_eq!(depth("a.b.c.d"), 3);
        assert_eq!(depth("1 in 1 in 1"), 2);
        assert_eq!(depth("a == 1 && b != 2 || !c"), 5);
        assert_eq!(depth("-1 <= 2 ? x : y"), 3);
    }

    #[test]
    fn groups_add_their_own_level_and_arguments_do_not_add_up() {
        assert_eq!(depth("f(1 + 1, 2 + 2 + 2)"), 2 + 1 + MACRO_LEVELS);
        assert_eq!(depth("[1, 2, 3]"), 1 + MACRO_LEVELS);
        assert_eq!(depth("((1))"), 2 * (1 + MACRO_LEVELS));
        assert_eq!(depth("x.all(y, y > 1) && z"), 2 + (1 + 1 + MACRO_LEVELS));
    }

    #[test]
    fn well_formed_strings_and_comments_are_skipped() {
        assert_eq!(
            depth("'a.b.c+d' + \"(((\" + '''x.y\n.z''' + r'\\' + b'\\x41.'"),
            4
        );
        assert_eq!(depth("1 // + + + (((\n"), 0);
        assert_eq!(depth("'it\\'s' + 1"), 1);
    }

    #[test]
    fn malformed_strings_are_scanned_as_code() {
        // Unterminated, broken by a line end, or with an invalid escape: the lexer would not read
        // a string there, so neither does the scan.
        assert_eq!(depth("'a.b.c"), 2);
        assert_eq!(depth("'a.b\n' + 1"), 2);
        assert_eq!(depth("'\\q.x'"), 1);
        // `rb` is an identifier and what follows an ordinary string, whose `\'` is an escape;
        // `br` is the raw bytes prefix, where the backslash is a character and `'` ends it.
        assert_eq!(depth("rb'\\'.x'"), 0);
        assert_eq!(depth("br'\\'.x'"), 1);
    }

    #[test]
    fn errors_name_the_column_and_the_limit() {
        let e = check("1+1+1+1", 64, 2).expect_err("too deep");
        assert_eq!(
            e,
            ScanError::Depth {
                column: 6,
                limit: 2
            }
        );
        let e = check("((((1))))", 3, 100).expect_err("too nested");
        assert_eq!(
            e,
            ScanError::Nesting {
                column: 4,
                limit: 3
            }
        );
        assert_eq!(e.column(), 4);
        assert!(e.to_string().contains("deeper than 3 levels"));
    }
}
