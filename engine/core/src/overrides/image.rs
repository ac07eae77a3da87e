//! Container image references, parsed the way Karmada's `pkg/util/imageparser` does: the
//! distribution "reference" grammar, with **no** normalisation (`docker.io/` and `library/` are
//! never added), and the hostname split off only when it looks like one.

use std::fmt;

/// Longest repository name the reference grammar accepts (`NameTotalLengthMax`).
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// Why an image reference could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageParseError {
    /// The reference is the empty string.
    #[error("repository name must have at least one component")]
    NameEmpty,
    /// The reference would be valid if lowercased.
    #[error("repository name must be lowercase")]
    NameContainsUppercase,
    /// The reference does not match the grammar.
    #[error("invalid reference format")]
    InvalidFormat,
    /// The name is longer than 255 characters.
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    /// The digest is well-formed but its algorithm or length is not acceptable.
    #[error("invalid digest {digest:?}: {reason}")]
    InvalidDigest {
        /// The digest text.
        digest: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The components of an image reference: `[hostname/]repository[:tag|@digest]`.
///
/// At most one of `tag` and `digest` is non-empty after [`ImageRef::parse`] (a reference with
/// both keeps the tag and drops the digest, as Karmada does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host, optionally with port (`registry.k8s.io`, `localhost:5000`), or empty.
    pub hostname: String,
    /// Repository path without the hostname (`karmada/karmada-controller-manager`).
    pub repository: String,
    /// Tag, or empty.
    pub tag: String,
    /// Digest (`sha256:…`), or empty.
    pub digest: String,
}

impl ImageRef {
    /// Parses `image` with the distribution reference grammar (`reference.Parse`), then splits
    /// the hostname off with Karmada's `SplitHostname` heuristic.
    ///
    /// # Errors
    /// The reference does not match the grammar, is too long, or carries an unusable digest.
    pub fn parse(image: &str) -> Result<Self, ImageParseError> {
        let (name, tag, digest) = match split_reference(image) {
            Some(parts) => parts,
            None => {
                if image.is_empty() {
                    return Err(ImageParseError::NameEmpty);
                }
                if split_reference(&image.to_lowercase()).is_some() {
                    return Err(ImageParseError::NameContainsUppercase);
                }
                return Err(ImageParseError::InvalidFormat);
            }
        };
        // Only the path (not the domain) counts towards the length limit.
        let path_len = match name.split_once('/') {
            Some((domain, path)) if is_domain_and_port(domain) && is_remote_name(path) => {
                path.len()
            }
            _ => name.len(),
        };
        if path_len > NAME_TOTAL_LENGTH_MAX {
            return Err(ImageParseError::NameTooLong);
        }
        if let Some(d) = digest {
            validate_digest(d)?;
        }
        let (hostname, repository) = split_hostname(name);
        let mut out = ImageRef {
            hostname: hostname.to_string(),
            repository: repository.to_string(),
            tag: String::new(),
            digest: String::new(),
        };
        match (tag, digest) {
            (Some(t), _) => out.tag = t.to_string(),
            (None, Some(d)) => out.digest = d.to_string(),
            (None, None) => {}
        }
        Ok(out)
    }

    /// `[hostname/]repository`.
    pub fn full_repository(&self) -> String {
        if self.hostname.is_empty() {
            self.repository.clone()
        } else {
            format!("{}/{}", self.hostname, self.repository)
        }
    }

    /// The tag when set, otherwise the digest.
    pub fn tag_or_digest(&self) -> &str {
        if self.tag.is_empty() {
            &self.digest
        } else {
            &self.tag
        }
    }

    /// Karmada's `SetTagOrDigest`: a value matching the tag grammar becomes the tag (digest
    /// cleared); else one matching the digest grammar becomes the digest (tag cleared); anything
    /// else is silently ignored.
    pub fn set_tag_or_digest(&mut self, input: &str) {
        if is_tag(input) {
            self.tag = input.to_string();
            self.digest.clear();
        } else if is_digest_pattern(input) {
            self.digest = input.to_string();
            self.tag.clear();
        }
    }

    /// Clears the tag when set, otherwise the digest.
    pub fn remove_tag_or_digest(&mut self) {
        if !self.tag.is_empty() {
            self.tag.clear();
        } else {
            self.digest.clear();
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full_repository())?;
        if !self.tag.is_empty() {
            write!(f, ":{}", self.tag)
        } else if !self.digest.is_empty() {
            write!(f, "@{}", self.digest)
        } else {
            Ok(())
        }
    }
}

/// Karmada's `SplitHostname`: the part before the first `/` is the hostname only if it contains
/// `.` or `:` or is `localhost`.
fn split_hostname(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => (host, rest),
        _ => ("", name),
    }
}

/// Splits `name[:tag][@digest]`, checking every part against the grammar.
fn split_reference(s: &str) -> Option<(&str, Option<&str>, Option<&str>)> {
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => {
            if !is_digest_pattern(d) {
                return None;
            }
            (r, Some(d))
        }
        None => (s, None),
    };
    // A tag never contains '/' and the only ':' a name may hold is a port followed by '/'.
    let (name, tag) = match rest.rfind(':') {
        Some(i) if !rest[i + 1..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    if tag.is_some_and(|t| !is_tag(t)) {
        return None;
    }
    if !is_name(name) {
        return None;
    }
    Some((name, tag, digest))
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `[\w][\w.-]{0,127}`, anchored.
pub(crate) fn is_tag(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && is_word(b[0])
        && b[1..].iter().all(|&c| is_word(c) || c == b'.' || c == b'-')
}

/// `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`, anchored.
pub(crate) fn is_digest_pattern(s: &str) -> bool {
    let Some((alg, hex)) = s.split_once(':') else {
        return false;
    };
    if hex.len() < 32 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    let b = alg.as_bytes();
    let mut i = 0;
    loop {
        // component: [A-Za-z][A-Za-z0-9]*
        if i >= b.len() || !b[i].is_ascii_alphabetic() {
            return false;
        }
        i += 1;
        while i < b.len() && b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if i == b.len() {
            return true;
        }
        if !matches!(b[i], b'-' | b'_' | b'+' | b'.') {
            return false;
        }
        i += 1;
    }
}

/// `go-digest` validation: a registered algorithm and lowercase hex of the exact length.
fn validate_digest(d: &str) -> Result<(), ImageParseError> {
    let err = |reason| {
        Err(ImageParseError::InvalidDigest {
            digest: d.to_string(),
            reason,
        })
    };
    let Some((alg, hex)) = d.split_once(':') else {
        return err("invalid checksum digest format");
    };
    let want = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return err("unsupported digest algorithm"),
    };
    if hex.len() != want {
        return err("invalid checksum digest length");
    }
    if !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return err("invalid checksum digest format");
    }
    Ok(())
}

/// `namePat = optional(domainAndPort "/") remoteName`.
fn is_name(s: &str) -> bool {
    s.split_once('/')
        .is_some_and(|(domain, path)| is_domain_and_port(domain) && is_remote_name(path))
        || is_remote_name(s)
}

/// `pathComponent ("/" pathComponent)*`.
fn is_remote_name(s: &str) -> bool {
    s.split('/').all(is_path_component)
}

/// `[a-z0-9]+ (separator [a-z0-9]+)*` with `separator = [._] | __ | [-]+`.
fn is_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && alnum(b[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == b.len() {
            return true;
        }
        let sep_start = i;
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < b.len() && b[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < b.len() && b[i] == b'-' {
                    i += 1;
                }
            }
            _ => return false,
        }
        debug_assert!(i > sep_start);
    }
}

/// `host (":" [0-9]+)?` with `host = domainName | "[" ipv6 "]"`.
fn is_domain_and_port(s: &str) -> bool {
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(i) => {
                let (h, rest) = s.split_at(i + 1);
                match rest.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None if rest.is_empty() => (h, None),
                    None => return false,
                }
            }
            None => return false,
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit())) {
        return false;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !inner.is_empty() && inner.bytes().all(|c| c.is_ascii_hexdigit() || c == b':');
    }
    host.split('.').all(|c| {
        let b = c.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|&x| x.is_ascii_alphanumeric() || x == b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ImageRef {
        ImageRef::parse(s).expect(s)
    }

    // Cases ported from Karmada's pkg/util/imageparser/parser_test.go.
    #[test]
    fn parse_cases() {
        let c = p("fictional.registry.example:10443/karmada/karmada-controller-manager:v1.0.0");
        assert_eq!(c.hostname, "fictional.registry.example:10443");
        assert_eq!(c.repository, "karmada/karmada-controller-manager");
        assert_eq!(c.tag, "v1.0.0");
        let c = p("karmada/karmada-controller-manager");
        assert_eq!(
            (c.hostname.as_str(), c.repository.as_str()),
            ("", "karmada/karmada-controller-manager")
        );
        let d = "sha256:50d858e0985ecc7f60418aaf0cc5ab587f42c2570a884095a9e8ccacd0f6545c";
        let c = p(&format!(
            "fictional.registry.example/karmada-controller-manager@{d}"
        ));
        assert_eq!(c.digest, d);
        assert_eq!(c.tag, "");
        let c = p(&format!("karmada-controller-manager:v1.0.0@{d}"));
        assert_eq!(c.tag, "v1.0.0");
        assert_eq!(c.digest, "");
        assert_eq!(c.to_string(), "karmada-controller-manager:v1.0.0");
        let c = p("localhost/nginx");
        assert_eq!(c.hostname, "localhost");
        let c = p("localhost:5000/nginx:1");
        assert_eq!(
            (c.hostname.as_str(), c.tag.as_str()),
            ("localhost:5000", "1")
        );
        let c = p("nginx:5000");
        assert_eq!((c.repository.as_str(), c.tag.as_str()), ("nginx", "5000"));
        let c = p("Foo/bar");
        assert_eq!(
            (c.hostname.as_str(), c.repository.as_str()),
            ("", "Foo/bar")
        );
        let c = p("[::1]:5000/foo:v1");
        assert_eq!(c.hostname, "[::1]:5000");
    }

    #[test]
    fn parse_errors() {
        assert_eq!(ImageRef::parse(""), Err(ImageParseError::NameEmpty));
        assert_eq!(
            ImageRef::parse("Nginx"),
            Err(ImageParseError::NameContainsUppercase)
        );
        assert_eq!(
            ImageRef::parse("nginx:"),
            Err(ImageParseError::InvalidFormat)
        );
        assert_eq!(ImageRef::parse("a//b"), Err(ImageParseError::InvalidFormat));
        assert!(matches!(
            ImageRef::parse("nginx@sha256:abcd0123abcd0123abcd0123abcd0123"),
            Err(ImageParseError::InvalidDigest { .. })
        ));
        assert!(matches!(
            ImageRef::parse("nginx@md5:abcd0123abcd0123abcd0123abcd0123"),
            Err(ImageParseError::InvalidDigest { .. })
        ));
        let long = "a".repeat(256);
        assert_eq!(ImageRef::parse(&long), Err(ImageParseError::NameTooLong));
        assert!(ImageRef::parse(&format!("registry.io/{}", "a".repeat(255))).is_ok());
    }

    #[test]
    fn tag_or_digest() {
        let mut c = p("nginx:1.0");
        c.set_tag_or_digest("not a tag");
        assert_eq!(c.to_string(), "nginx:1.0");
        c.set_tag_or_digest("sha256:0123456789abcdef0123456789abcdef");
        assert_eq!(
            c.to_string(),
            "nginx@sha256:0123456789abcdef0123456789abcdef"
        );
        c.remove_tag_or_digest();
        assert_eq!(c.to_string(), "nginx");
        let mut c = p("host.io/nginx:1");
        c.repository.clear();
        assert_eq!(c.to_string(), "host.io/:1");
    }
}
