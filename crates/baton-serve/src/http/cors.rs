//! CORS (`--cors-origins`): which web pages' scripts may call the server.
//!
//! A request with an `Origin` the server allows gets
//! `Access-Control-Allow-Origin` on its answer (errors, 401 and streams
//! included); a preflight (`OPTIONS`) is answered here, before the key
//! check (browsers send it without credentials), with the methods served
//! and the headers the page asked to send (`Authorization` among them).
//! A preflight from an origin not allowed gets 403 in the error shape.
//! By default every origin is allowed, as llama-server allows.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The methods the server's routes answer.
const METHODS: &str = "GET, POST, OPTIONS";

/// How long a browser may keep a preflight's answer, in seconds.
const MAX_AGE_S: &str = "86400";

/// The origins whose pages may call the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// Every origin (`*`, the default).
    #[default]
    Any,
    /// These origins only (`https://app.example:8443`), compared exactly,
    /// the scheme and host in any case.
    Only(Vec<String>),
}

/// A bad `--cors-origins` value.
#[derive(Debug, thiserror::Error)]
pub enum CorsError {
    /// The list names no origin.
    #[error("no origin named: give `*` or origins such as `https://app.example`")]
    Empty,
    /// An origin that is not `scheme://host[:port]`.
    #[error("`{origin}` is not an origin (scheme://host[:port], no path), nor `*`")]
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
        match self {
            CorsOrigins::Any => Some(HeaderValue::from_static("*")),
            CorsOrigins::Only(list) => {
                let asked = origin.to_str().ok()?.to_ascii_lowercase();
                list.contains(&asked).then(|| origin.clone())
            }
        }
    }
}

/// The middleware: answers preflights, and adds the CORS headers to the
/// answers of allowed origins.
pub(super) async fn cors(State(origins): State<Arc<CorsOrigins>>, request: Request, next: Next) -> Response {
    let origin = request.headers().get(header::ORIGIN).cloned();
    let allowed = origin.as_ref().and_then(|o| origins.allow(o));
    if request.method() == Method::OPTIONS {
        return preflight(&origins, origin.is_some(), allowed, request.headers());
    }
    let mut response = next.run(request).await;
    if let Some(allowed) = allowed {
        add_origin(response.headers_mut(), &origins, allowed);
    }
    response
}

/// The answer to an `OPTIONS` request: 204 with what may be sent, or 403
/// when its origin is not allowed.
fn preflight(origins: &CorsOrigins, has_origin: bool, allowed: Option<HeaderValue>, asked: &HeaderMap) -> Response {
    if has_origin && allowed.is_none() {
        return ApiError::with_status(StatusCode::FORBIDDEN, "this origin is not allowed (--cors-origins)")
            .into_response();
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ALLOW, HeaderValue::from_static(METHODS));
    if let Some(allowed) = allowed {
        add_origin(headers, origins, allowed);
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
        // A wildcard does not cover `Authorization` (Fetch): the headers
        // asked for are allowed by name.
        let wanted = asked.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, wanted.unwrap_or(HeaderValue::from_static("*")));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE_S));
    }
    response
}

fn add_origin(headers: &mut HeaderMap, origins: &CorsOrigins, allowed: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
    if matches!(origins, CorsOrigins::Only(_)) {
        // The answer depends on the origin: caches must key on it.
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
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
        assert_eq!(CorsOrigins::Any.allow(&origin), Some(HeaderValue::from_static("*")));
    }
}
