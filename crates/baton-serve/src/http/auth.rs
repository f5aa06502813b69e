//! API keys (`--api-key`, `--api-key-file`) and whose cache a request
//! uses.
//!
//! With keys set, every route but `GET /health` (and a browser's CORS
//! preflight, answered before this check: `cors.rs`) needs one of them, sent as
//! `Authorization: Bearer KEY` (OpenAI's clients) or `x-api-key: KEY`
//! (Anthropic's); a request without one, or with another, gets 401 in the
//! OpenAI error shape with `WWW-Authenticate: Bearer`, before its body is
//! read.
//!
//! Keys are kept as their SHA-256 digests, and a presented key is checked
//! by digesting it and comparing the digest with every kept one, each
//! comparison over all 32 bytes without an early exit and the loop over
//! all keys without one either: the time taken depends on the length of
//! the key presented (the client's own) and the number of keys, not on how
//! much of a kept key it matches, nor on a kept key's length.
//!
//! The prefix cache is scoped: a request's [`CacheScope`] is a keyed hash
//! (SipHash with keys drawn at random when the server starts, so no
//! client can predict it) of its key and its `cache_salt`. Requests share
//! cached prompts only when both are equal; without keys and without a
//! salt, all share one scope.

use std::collections::hash_map::RandomState;
use std::convert::Infallible;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::anthropic::error::{is_anthropic_path, AnthropicError};
use super::error::ApiError;
use crate::engine::CacheScope;

/// The path that answers without a key (load balancers and probes).
pub const OPEN_PATH: &str = "/health";

/// Why API keys could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeyError {
    /// The key file could not be read.
    #[error("reading the API key file {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file holds no key.
    #[error("the API key file {path} holds no key (one key a line; blank lines are ignored)")]
    NoKeysInFile {
        /// The file.
        path: PathBuf,
    },
    /// A key is empty.
    #[error("an API key is empty")]
    Empty,
    /// A key holds a control character (no header can carry it).
    #[error("API key number {number} holds a control character, which no HTTP header can carry")]
    ControlCharacter {
        /// Which key, counting from 1.
        number: usize,
    },
}

/// The keys a request may present; none: every route is open.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not even the digests: a log line should not help a guess.
        f.debug_struct("ApiKeys").field("keys", &self.digests.len()).finish()
    }
}

fn digest(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
}

/// Whether `a` and `b` are equal, looking at every byte whatever the
/// first difference (`black_box` keeps the compiler from ending early).
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut differ = 0u8;
    for (x, y) in a.iter().zip(b) {
        differ |= std::hint::black_box(x ^ y);
    }
    std::hint::black_box(differ) == 0
}

impl ApiKeys {
    /// No keys: every route is open.
    pub fn none() -> ApiKeys {
        ApiKeys::default()
    }

    /// These keys (duplicates are kept once); `Err` for an empty key or one
    /// with a control character.
    pub fn new<K: AsRef<str>>(keys: impl IntoIterator<Item = K>) -> Result<ApiKeys, ApiKeyError> {
        let mut digests = Vec::new();
        for (i, key) in keys.into_iter().enumerate() {
            let key = key.as_ref();
            if key.is_empty() {
                return Err(ApiKeyError::Empty);
            }
            if key.chars().any(char::is_control) {
                return Err(ApiKeyError::ControlCharacter { number: i + 1 });
            }
            let d = digest(key.as_bytes());
            if !digests.contains(&d) {
                digests.push(d);
            }
        }
        Ok(ApiKeys { digests })
    }

    /// The keys of a file: one a line, spaces around a key and blank lines
    /// ignored (llama-server's `--api-key-file`); `Err` when it cannot be
    /// read or holds none.
    pub fn read_file(path: &Path) -> Result<Vec<String>, ApiKeyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ApiKeyError::Unreadable { path: path.to_path_buf(), source })?;
        let keys: Vec<String> = text.lines().map(str::trim).filter(|k| !k.is_empty()).map(String::from).collect();
        if keys.is_empty() {
            return Err(ApiKeyError::NoKeysInFile { path: path.to_path_buf() });
        }
        Ok(keys)
    }

    /// Whether no key is needed.
    pub fn is_open(&self) -> bool {
        self.digests.is_empty()
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no keys are held (as [`is_open`](Self::is_open)).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The caller that `presented` names, if it is one of the keys. Every
    /// kept digest is compared, whichever matches.
    fn check(&self, presented: &[u8]) -> Option<Caller> {
        let d = digest(presented);
        let mut found = false;
        for kept in &self.digests {
            found |= same_digest(&d, kept);
        }
        std::hint::black_box(found).then_some(Caller { key: Some(d) })
    }
}

/// Who sent a request: the digest of its key (`None` when the server
/// needs none). Handlers extract it; the key check puts it in the
/// request's extensions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Caller {
    key: Option<[u8; 32]>,
}

impl Caller {
    /// The request's cache scope: its key and `salt` hashed with the
    /// server's random `seed`. An empty salt is refused (400).
    pub(super) fn cache_scope(&self, seed: &RandomState, salt: Option<&str>) -> Result<CacheScope, ApiError> {
        if salt.is_some_and(str::is_empty) {
            return Err(ApiError::invalid_param("cache_salt", "cache_salt is empty: a non-empty string, or absent"));
        }
        Ok(CacheScope(seed.hash_one((self.key, salt))))
    }
}

/// A request's `cache_salt`: absent or `null` (none), or a string; any
/// other value is refused (400).
pub(super) fn cache_salt(value: Option<&serde_json::Value>) -> Result<Option<&str>, ApiError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(salt)) => Ok(Some(salt)),
        Some(other) => Err(ApiError::invalid_param("cache_salt", format!("cache_salt = {other}: a string"))),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(parts.extensions.get::<Caller>().copied().unwrap_or_default())
    }
}

/// The key a request presents: the token of `Authorization: Bearer`
/// (the scheme's name in any case), else `x-api-key`'s value.
fn presented(headers: &HeaderMap) -> Option<&[u8]> {
    let bearer = headers.get(axum::http::header::AUTHORIZATION).and_then(|value| {
        let value = value.as_bytes().trim_ascii();
        let (scheme, token) = value.split_at_checked(6)?;
        (scheme.eq_ignore_ascii_case(b"bearer") && token.first().is_some_and(|&c| c == b' '))
            .then(|| token.trim_ascii())
    });
    bearer.or_else(|| headers.get("x-api-key").map(|value| value.as_bytes().trim_ascii())).filter(|k| !k.is_empty())
}

/// The middleware: passes a request on when the server needs no key, it
/// asks for [`OPEN_PATH`], or it presents one of the keys (then with its
/// [`Caller`]); answers 401 otherwise.
pub(super) async fn require_key(State(keys): State<Arc<ApiKeys>>, mut request: Request, next: Next) -> Response {
    if keys.is_open() || request.uri().path() == OPEN_PATH {
        return next.run(request).await;
    }
    let refused = match presented(request.headers()) {
        None => ApiError::unauthorized("no API key: send `Authorization: Bearer KEY` or `x-api-key: KEY`"),
        Some(key) => match keys.check(key) {
            Some(caller) => {
                request.extensions_mut().insert(caller);
                return next.run(request).await;
            }
            None => ApiError::unauthorized("invalid API key"),
        },
    };
    match is_anthropic_path(request.uri().path()) {
        true => AnthropicError(refused).into_response(),
        false => refused.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in pairs {
            map.append(name, value.parse().expect("a header value"));
        }
        map
    }

    #[test]
    fn a_key_is_read_from_bearer_else_x_api_key() {
        let key = |pairs: &[(&'static str, &str)]| presented(&headers(pairs)).map(|k| k.to_vec());
        assert_eq!(key(&[("authorization", "Bearer abc")]), Some(b"abc".to_vec()));
        assert_eq!(key(&[("authorization", "bearer  abc ")]), Some(b"abc".to_vec()));
        assert_eq!(key(&[("x-api-key", "xyz")]), Some(b"xyz".to_vec()));
        assert_eq!(key(&[("authorization", "Bearer abc"), ("x-api-key", "xyz")]), Some(b"abc".to_vec()));
        assert_eq!(key(&[("authorization", "Basic abc"), ("x-api-key", "xyz")]), Some(b"xyz".to_vec()));
        assert_eq!(key(&[("authorization", "Bearerabc")]), None);
        assert_eq!(key(&[("authorization", "Bearer ")]), None);
        assert_eq!(key(&[]), None);
    }

    #[test]
    fn only_a_kept_key_names_a_caller() {
        let keys = ApiKeys::new(["alpha", "beta", "alpha"]).expect("keys");
        assert_eq!(keys.len(), 2, "a duplicate is kept once");
        assert!(keys.check(b"alpha").is_some() && keys.check(b"beta").is_some());
        for wrong in [&b"alph"[..], b"alphaa", b"", b"gamma", b"ALPHA"] {
            assert!(keys.check(wrong).is_none(), "{wrong:?}");
        }
        assert!(matches!(ApiKeys::new([""]), Err(ApiKeyError::Empty)));
        assert!(matches!(ApiKeys::new(["ok", "a\nb"]), Err(ApiKeyError::ControlCharacter { number: 2 })));
        assert!(format!("{keys:?}").contains("keys: 2") && !format!("{keys:?}").contains("alpha"));
    }

    #[test]
    fn scopes_differ_by_key_and_by_salt() {
        let seed = RandomState::new();
        let keys = ApiKeys::new(["alpha", "beta"]).expect("keys");
        let (alpha, beta) = (keys.check(b"alpha").expect("alpha"), keys.check(b"beta").expect("beta"));
        let scope = |caller: &Caller, salt| caller.cache_scope(&seed, salt).expect("scope");
        assert_eq!(scope(&alpha, None), scope(&alpha, None));
        assert_ne!(scope(&alpha, None), scope(&beta, None));
        assert_ne!(scope(&alpha, Some("s")), scope(&alpha, None));
        assert_ne!(scope(&alpha, Some("s")), scope(&alpha, Some("t")));
        assert_ne!(scope(&alpha, Some("s")), scope(&beta, Some("s")));
        let nobody = Caller::default();
        assert_eq!(scope(&nobody, None), scope(&Caller::default(), None), "without keys: one scope");
        assert!(nobody.cache_scope(&seed, Some("")).is_err(), "an empty salt");
    }

    #[test]
    fn a_key_file_gives_its_lines_and_refuses_none() {
        let dir = baton_testkit::TempDir::new("api-keys");
        let file = dir.path().join("keys");
        std::fs::write(&file, "alpha\n\n  beta \r\n\n").expect("write");
        assert_eq!(ApiKeys::read_file(&file).expect("keys"), ["alpha", "beta"]);
        std::fs::write(&file, "\n \n").expect("write");
        assert!(matches!(ApiKeys::read_file(&file), Err(ApiKeyError::NoKeysInFile { .. })));
        assert!(matches!(ApiKeys::read_file(&dir.path().join("absent")), Err(ApiKeyError::Unreadable { .. })));
    }
}
