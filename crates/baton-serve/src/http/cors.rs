//! CORS (`--cors-origins`): which web pages' scripts may call the server.
//!
//! As llama-server answers: a request with an `Origin` the server allows
//! gets `Access-Control-Allow-Origin` (that origin, echoed) and
//! `Access-Control-Allow-Credentials: true` on its answer (errors, 401 and
//! streams included); a preflight (`OPTIONS`) is answered here with 200,
//! before the key check (browsers send it without credentials), with the
//! methods and the headers the page asked to send (by name: the Fetch
//! standard's `*` does not cover `Authorization`, so a page sending a key
//! would be refused by its browser; llama-server sends `*`). An origin not
//! allowed gets its answer without the CORS headers, so its browser keeps
//! the answer from the page. By default every origin is allowed, as
//! llama-server allows; `localhost` allows pages served from this machine
//! (`localhost`, `127.0.0.1`, `[::1]`, any port, http or https).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The methods a page may use, as llama-server lists them (a route without
/// one answers 405).
const METHODS: &str = "GET, POST, DELETE, OPTIONS";

/// How long a browser may keep a preflight's answer, in seconds.
const MAX_AGE_S: &str = "86400";

/// The origins whose pages may call the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// Every origin (`*`, the default).
    #[default]
    Any,
    /// These origins only (`https://app.example:8443`), compared exactly,
    /// the scheme and host in any case; with `localhost`, also every origin
    /// of this machine (see [`is_local`]).
    Only(Vec<String>),
}

/// A bad `--cors-origins` value.
#[derive(Debug, thiserror::Error)]
pub enum CorsError {
    /// The list names no origin.
    #[error("no origin named: give `*` or origins such as `https://app.example`")]
    Empty,
    /// An origin that is not `scheme://host[:port]`.
    #[error("`{origin}` is not an origin (scheme://host[:port], no path), nor `*` or `localhost`")]
    NotAnOrigin {
        /// The value given.
        origin: String,
    },
}

impl std::str::FromStr for CorsOrigins {
    type Err = CorsError;

    /// `*`, or origins separated by commas.
    fn from_str(text: &str) -> Result<CorsOrigins, CorsError> {
        let items: Vec<&str> = text.split(',').map(str::trim).filter(|o| !o.is_empty()).collect();
        if items.is_empty() {
            return Err(CorsError::Empty);
        }
        if items.contains(&"*") {
            return Ok(CorsOrigins::Any);
        }
        let origins = items
            .into_iter()
            .map(|origin| {
                if origin.eq_ignore_ascii_case(LOCALHOST) {
                    return Ok(LOCALHOST.to_string());
                }
                let bad = || CorsError::NotAnOrigin { origin: origin.to_string() };
                let (scheme, rest) = origin.split_once("://").ok_or_else(bad)?;
                let fine = !scheme.is_empty()
                    && !rest.is_empty()
                    && !rest.contains('/')
                    && origin.bytes().all(|b| b.is_ascii_graphic());
                if !fine {
                    return Err(bad());
                }
                Ok(origin.to_ascii_lowercase())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CorsOrigins::Only(origins))
    }
}

impl CorsOrigins {
    /// The `Access-Control-Allow-Origin` value for a request from
    /// `origin`, or `None` when that origin is not allowed.
    fn allow(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        let allowed = match self {
            CorsOrigins::Any => true,
            CorsOrigins::Only(list) => {
                let asked = origin.to_str().ok()?.to_ascii_lowercase();
                list.contains(&asked) || (list.iter().any(|o| o == LOCALHOST) && is_local(&asked))
            }
        };
        allowed.then(|| origin.clone())
    }
}

/// `--cors-origins`' word for this machine's origins.
const LOCALHOST: &str = "localhost";

/// Whether `origin` (lowercase) is a page of this machine: http or https,
/// host `localhost`, `127.0.0.1` or `[::1]`, any port, nothing after.
fn is_local(origin: &str) -> bool {
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = match rest.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && host != "[" => host,
        _ => rest,
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// The middleware: answers preflights, and adds the CORS headers to the
/// answers of allowed origins.
pub(super) async fn cors(State(origins): State<Arc<CorsOrigins>>, request: Request, next: Next) -> Response {
    let origin = request.headers().get(header::ORIGIN).cloned();
    let allowed = origin.as_ref().and_then(|o| origins.allow(o));
    if request.method() == Method::OPTIONS {
        return preflight(allowed, request.headers());
    }
    let mut response = next.run(request).await;
    if let Some(allowed) = allowed {
        add_origin(response.headers_mut(), allowed);
    }
    response
}

/// The answer to an `OPTIONS` request: 200, with what may be sent when its
/// origin is allowed (without it, the page's browser refuses the request).
fn preflight(allowed: Option<HeaderValue>, asked: &HeaderMap) -> Response {
    let mut response = StatusCode::OK.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ALLOW, HeaderValue::from_static(METHODS));
    if let Some(allowed) = allowed {
        add_origin(headers, allowed);
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
        // A wildcard does not cover `Authorization` (Fetch): the headers
        // asked for are allowed by name.
        let wanted = asked.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, wanted.unwrap_or(HeaderValue::from_static("*")));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE_S));
    }
    response
}

fn add_origin(headers: &mut HeaderMap, allowed: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
    headers.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
    // The answer echoes the origin: caches must key on it.
    headers.append(header::VARY, HeaderValue::from_static("origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_read_from_a_list_or_a_star() {
        assert_eq!("*".parse::<CorsOrigins>().expect("star"), CorsOrigins::Any);
        assert_eq!("https://a.example, *".parse::<CorsOrigins>().expect("star"), CorsOrigins::Any);
        let list = "https://A.example, http://localhost:3000".parse::<CorsOrigins>().expect("list");
        assert_eq!(list, CorsOrigins::Only(vec!["https://a.example".into(), "http://localhost:3000".into()]));
        for bad in ["", " , ", "a.example", "https://a.example/path", "https://", "https://a b"] {
            assert!(bad.parse::<CorsOrigins>().is_err(), "{bad:?}");
        }
        let origin = HeaderValue::from_static("https://a.EXAMPLE");
        assert!(list.allow(&origin).is_some());
        assert!(list.allow(&HeaderValue::from_static("https://b.example")).is_none());
        assert_eq!(CorsOrigins::Any.allow(&origin), Some(origin.clone()));
    }

    #[test]
    fn localhost_allows_this_machines_pages_only() {
        let local = "localhost, https://app.example".parse::<CorsOrigins>().expect("list");
        for page in
            ["http://localhost", "http://LOCALHOST:8080", "https://127.0.0.1:3000", "http://[::1]", "http://[::1]:3000"]
        {
            assert!(local.allow(&HeaderValue::from_str(page).expect("header")).is_some(), "{page}");
        }
        for page in [
            "http://notlocalhost",
            "http://localhost.evil.com",
            "http://evil.com",
            "http://localhost:80/x",
            "ftp://localhost",
            "http://127.0.0.1:",
        ] {
            assert!(local.allow(&HeaderValue::from_str(page).expect("header")).is_none(), "{page}");
        }
        assert!(local.allow(&HeaderValue::from_static("https://app.example")).is_some());
    }
}
