//! Label and field selectors, as in `?labelSelector=` and `?fieldSelector=`.

use serde_json::Value;

use crate::error::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (requirements are ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(rest: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: set expected, got {rest:?}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (f,g),!h,i`.
    ///
    /// # Errors
    /// A 400 BadRequest for malformed selectors.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                LabelReq::NotIn(k.trim().to_owned(), set_values(rest)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                LabelReq::In(k.trim().to_owned(), set_values(rest)?)
            } else if part.contains(char::is_whitespace) || part.contains('(') {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: {part:?}"
                )));
            } else {
                LabelReq::Exists(part.to_owned())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object's labels match.
    pub fn matches(&self, obj: &Value) -> bool {
        self.matches_labels(obj.pointer("/metadata/labels"))
    }

    /// Whether `labels` (an object's `metadata.labels`, if any) match.
    pub fn matches_labels(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: `path=value` / `path!=value` terms over the object's JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parse `metadata.name=x,status.phase!=Running`.
    ///
    /// # Errors
    /// A 400 BadRequest for malformed selectors.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, eq, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            terms.push((path.trim().to_owned(), eq, value.trim().to_owned()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name an exact `metadata.name=` term pins, if any.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, eq, _)| p == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether the object matches (missing fields compare as the empty string).
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = Some(obj);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let have = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_supports_equality_sets_and_existence() {
        let obj = json!({"metadata":{"labels":{"app":"web","tier":"fe"}}});
        assert!(
            LabelSelector::parse("app=web,tier in (fe,be),!gone,tier")
                .unwrap()
                .matches(&obj)
        );
        assert!(!LabelSelector::parse("app!=web").unwrap().matches(&obj));
        assert!(
            LabelSelector::parse("env notin (prod)")
                .unwrap()
                .matches(&obj)
        );
    }

    #[test]
    fn field_selector_reads_arbitrary_paths() {
        let obj = json!({"metadata":{"name":"a","namespace":"d"},"involvedObject":{"uid":"u"}});
        assert!(
            FieldSelector::parse("metadata.name=a,involvedObject.uid=u")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("metadata.namespace!=d")
                .unwrap()
                .matches(&obj)
        );
    }
}
