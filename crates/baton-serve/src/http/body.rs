//! The request body read as JSON whatever its `Content-Type` says (as
//! llama.cpp's server does, so `curl -d '{…}'` works), within the body
//! limit.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body of type `T`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            let status = rejection.status();
            let message = match status {
                StatusCode::PAYLOAD_TOO_LARGE => format!("the request body is too large: {}", rejection.body_text()),
                _ => format!("reading the request body: {}", rejection.body_text()),
            };
            ApiError::with_status(status, message)
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::invalid(format!("the request body is not the JSON expected: {e}")))
    }
}
