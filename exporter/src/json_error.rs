//! The body of every error the HTTP surface answers: JSON
//! `{"error": "..."}` with a 4xx/5xx status, whichever route or layer
//! refuses.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// `status` with `{"error": msg}`.
pub fn json_error(status: StatusCode, msg: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": msg.into() }).to_string();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}
