//! Bearer authentication: which token a request presents, and which principal it names.
//!
//! Invariant: tokens are compared only as SHA-256 digests, in constant time, against every
//! principal (no early exit), so timing reveals neither a match position nor a prefix.

use crate::config::http::{Principal, token_digest};
use std::borrow::Cow;
use std::sync::Arc;

/// How long a request with a missing or invalid token waits for its 401 (seed 003): it
/// makes online guessing slow without holding a worker.
pub const UNAUTHORIZED_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

pub struct Authenticator {
    principals: Vec<Arc<Principal>>,
    allow_query_token: bool,
}

impl Authenticator {
    pub fn new(principals: Vec<Principal>, allow_query_token: bool) -> Authenticator {
        Authenticator {
            principals: principals.into_iter().map(Arc::new).collect(),
            allow_query_token,
        }
    }

    /// The principal whose token the request presents: the `Authorization: Bearer` header,
    /// else (only when enabled) the `token` query parameter.
    pub fn authenticate(
        &self,
        authorization: Option<&str>,
        query: Option<&str>,
    ) -> Option<Arc<Principal>> {
        let token: Cow<str> = match authorization.and_then(bearer) {
            Some(t) => Cow::Borrowed(t),
            None if self.allow_query_token => Cow::Owned(query.and_then(query_token)?),
            None => return None,
        };
        let digest = token_digest(token.as_bytes());
        let mut found = None;
        for p in &self.principals {
            if digests_equal(&p.token_digest, &digest) {
                found = Some(p.clone());
            }
        }
        found
    }
}

/// Constant-time equality of two digests.
pub fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// The credential of an `Authorization: Bearer <token>` header (scheme case-insensitive).
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

/// The percent-decoded value of the first `token=` parameter of a query string.
pub fn query_token(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .and_then(percent_decode)
        .filter(|t| !t.is_empty())
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::policy::{Profile, ToolPolicy};

    fn principal(name: &str, token: &str) -> Principal {
        Principal {
            name: name.into(),
            key: crate::config::http::key(name),
            token_digest: token_digest(token.as_bytes()),
            policy: ToolPolicy::profile(Profile::Full),
            token_file: None,
            token_env: None,
        }
    }

    #[test]
    fn header_and_query_tokens() {
        let a = Authenticator::new(
            vec![principal("a", "tok-a"), principal("b", "tok-b")],
            false,
        );
        assert_eq!(
            a.authenticate(Some("Bearer tok-b"), None).unwrap().name,
            "b"
        );
        assert_eq!(
            a.authenticate(Some("bearer  tok-a "), None).unwrap().name,
            "a"
        );
        assert!(a.authenticate(Some("Bearer tok-c"), None).is_none());
        assert!(a.authenticate(Some("Basic tok-a"), None).is_none());
        assert!(a.authenticate(None, Some("token=tok-a")).is_none());
        let q = Authenticator::new(vec![principal("a", "tok a")], true);
        assert_eq!(
            q.authenticate(None, Some("x=1&token=tok%20a"))
                .unwrap()
                .name,
            "a"
        );
        assert!(q.authenticate(None, Some("token=%zz")).is_none());
    }

    #[test]
    fn digest_comparison() {
        let x = token_digest(b"x");
        assert!(digests_equal(&x, &x));
        assert!(!digests_equal(&x, &token_digest(b"y")));
    }
}
