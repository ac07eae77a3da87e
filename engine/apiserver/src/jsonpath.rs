//! The JSON paths of CRD printer columns (`.status.conditions[?(@.type=="Ready")].status`):
//! the subset of kubectl's JSONPath that `additionalPrinterColumns` use. Fields (`.a`,
//! `['a.b']`), indexes (`[0]`, `[-1]`), wildcards (`[*]`, `.*`) and filters comparing a
//! relative path with a literal (`[?(@.type=="Ready")]`, `!=`) or testing that it exists.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter {
        path: Vec<String>,
        test: Option<(bool, Value)>,
    },
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct Path(Vec<Step>);

fn parse_literal(s: &str) -> Option<Value> {
    let s = s.trim();
    if let Some(inner) = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
    {
        return Some(Value::String(inner.to_owned()));
    }
    serde_json::from_str(s).ok()
}

fn parse_relative(s: &str) -> Option<Vec<String>> {
    let rest = s.trim().strip_prefix('@')?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let rest = rest.strip_prefix('.')?;
    let parts: Vec<String> = rest.split('.').map(str::to_owned).collect();
    parts.iter().all(|p| !p.is_empty()).then_some(parts)
}

impl Path {
    /// Parse a path (`.a.b`, `{.a.b}`, `$.a`); `None` for syntax this subset does not take.
    pub fn parse(text: &str) -> Option<Path> {
        let mut s = text.trim();
        if let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            s = inner.trim();
        }
        s = s.strip_prefix('$').unwrap_or(s);
        let mut steps = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'.' => {
                    let end = s[i + 1..].find(['.', '[']).map_or(s.len(), |e| e + i + 1);
                    let name = &s[i + 1..end];
                    match name {
                        "" if end == s.len() && steps.is_empty() => {}
                        "" => return None,
                        "*" => steps.push(Step::All),
                        _ => steps.push(Step::Field(name.to_owned())),
                    }
                    i = end;
                }
                b'[' => {
                    let close = if s[i..].starts_with("[?(") {
                        s[i..].find(")]").map(|e| e + i + 1)?
                    } else {
                        s[i..].find(']').map(|e| e + i)?
                    };
                    let inner = s[i + 1..close].trim();
                    if let Some(filter) = inner.strip_prefix("?(").and_then(|r| r.strip_suffix(')'))
                    {
                        let (path, test) = if let Some((l, r)) = filter.split_once("!=") {
                            (parse_relative(l)?, Some((false, parse_literal(r)?)))
                        } else if let Some((l, r)) = filter.split_once("==") {
                            (parse_relative(l)?, Some((true, parse_literal(r)?)))
                        } else {
                            (parse_relative(filter)?, None)
                        };
                        steps.push(Step::Filter { path, test });
                    } else if inner == "*" {
                        steps.push(Step::All);
                    } else if let Some(Value::String(name)) = (inner.starts_with(['\'', '"']))
                        .then(|| parse_literal(inner))
                        .flatten()
                    {
                        steps.push(Step::Field(name));
                    } else {
                        steps.push(Step::Index(inner.parse().ok()?));
                    }
                    i = close + 1;
                }
                _ if i == 0 => {
                    // A path without its leading dot (`status.phase`).
                    let end = s.find(['.', '[']).unwrap_or(s.len());
                    steps.push(Step::Field(s[..end].to_owned()));
                    i = end;
                }
                _ => return None,
            }
        }
        Some(Path(steps))
    }

    /// Every value the path finds in `root`, in document order.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in &self.0 {
            let mut next = Vec::new();
            for v in cur {
                match step {
                    Step::Field(f) => next.extend(v.get(f)),
                    Step::Index(n) => {
                        if let Some(a) = v.as_array() {
                            let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
                            let at = if *n < 0 { len + n } else { *n };
                            next.extend(usize::try_from(at).ok().and_then(|at| a.get(at)));
                        }
                    }
                    Step::All => match v {
                        Value::Array(a) => next.extend(a.iter()),
                        Value::Object(m) => next.extend(m.values()),
                        _ => {}
                    },
                    Step::Filter { path, test } => {
                        if let Some(a) = v.as_array() {
                            next.extend(a.iter().filter(|item| {
                                let found = path.iter().try_fold(*item, |x, k| x.get(k));
                                match (found, test) {
                                    (None, _) => false,
                                    (Some(_), None) => true,
                                    (Some(x), Some((eq, lit))) => (x == lit) == *eq,
                                }
                            }));
                        }
                    }
                }
            }
            cur = next;
        }
        cur
    }

    /// The first value the path finds (what a printer column shows).
    pub fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.find(root).into_iter().next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths_find_what_kubectl_finds() {
        let obj = json!({
            "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "x"}},
            "spec": {"workload": {"manifests": [{"kind": "Deployment"}, {"kind": "Service"}]}},
            "status": {"conditions": [
                {"type": "Applied", "status": "True"},
                {"type": "Ready", "status": "False"},
            ]},
        });
        let cases = [
            (".metadata.name", vec![json!("w")]),
            ("{.metadata.name}", vec![json!("w")]),
            ("$.metadata.name", vec![json!("w")]),
            ("metadata.name", vec![json!("w")]),
            (
                ".spec.workload.manifests[*].kind",
                vec![json!("Deployment"), json!("Service")],
            ),
            (".spec.workload.manifests[1].kind", vec![json!("Service")]),
            (".spec.workload.manifests[-1].kind", vec![json!("Service")]),
            (
                ".status.conditions[?(@.type==\"Applied\")].status",
                vec![json!("True")],
            ),
            (
                ".status.conditions[?(@.type=='Ready')].status",
                vec![json!("False")],
            ),
            (
                ".status.conditions[?(@.type!=\"Ready\")].type",
                vec![json!("Applied")],
            ),
            (
                ".metadata.labels['app.kubernetes.io/name']",
                vec![json!("x")],
            ),
            (".status.missing", vec![]),
            (".status.conditions[?(@.type==\"Gone\")].status", vec![]),
        ];
        for (path, want) in cases {
            let p = Path::parse(path).unwrap_or_else(|| panic!("{path} parses"));
            let got: Vec<Value> = p.find(&obj).into_iter().cloned().collect();
            assert_eq!(got, want, "{path}");
        }
    }

    #[test]
    fn unsupported_syntax_is_refused_not_guessed() {
        for bad in [".a..b", ".a[", ".a[x]", ".a[?(type==1)]"] {
            assert!(Path::parse(bad).is_none(), "{bad}");
        }
    }
}
