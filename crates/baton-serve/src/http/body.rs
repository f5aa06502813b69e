//! The request body read as JSON whatever its `Content-Type` says (as
//! llama.cpp's server does, so `curl -d '{…}'` works), within the body
//! limit and the body timeout.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::state::AppState;

/// A JSON body of type `T`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let read = Bytes::from_request(request, state);
        let bytes = match tokio::time::timeout(state.body_timeout, read).await {
            Ok(read) => read.map_err(|rejection| {
                let status = rejection.status();
                let message = match status {
                    StatusCode::PAYLOAD_TOO_LARGE => {
                        format!("the request body is too large: {}", rejection.body_text())
                    }
                    _ => format!("reading the request body: {}", rejection.body_text()),
                };
                ApiError::with_status(status, message)
            })?,
            Err(_) => {
                return Err(ApiError::with_status(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the request body did not arrive within {:?}", state.body_timeout),
                ))
            }
        };
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::invalid(format!("the request body is not the JSON expected: {e}")))
    }
}
