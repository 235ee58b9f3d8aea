//! A response before it becomes an HTTP response: status, headers in the order
//! given, and the body, so that a server can still decide how to send the body (or
//! not to).

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Response, StatusCode};
use serde_json::Value;

/// A response to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Headers (names lower-case), in order; `Content-Length` is added when
    /// sending.
    pub headers: Vec<(Cow<'static, str>, String)>,
    /// The body.
    pub body: Bytes,
    /// `Content-Length` to advertise without sending a body (HEAD, 304).
    pub head_len: Option<u64>,
}

impl Reply {
    /// A reply with `status`, no headers and no body.
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            head_len: None,
        }
    }

    /// A JSON body.
    pub fn json(status: u16, value: &Value) -> Self {
        Self::new(status)
            .header("content-type", "application/json; charset=UTF-8")
            .body(value.to_string())
    }

    /// An XML body.
    pub fn xml(status: u16, text: String) -> Self {
        Self::new(status)
            .header("content-type", "application/xml; charset=UTF-8")
            .body(text)
    }

    /// Adds a header (`name` lower-case).
    pub fn header(mut self, name: impl Into<Cow<'static, str>>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// The HTTP response, with `body` as its body (the reply's own, or one that sends
    /// it differently) and `Content-Length` set to the reply's body length or
    /// [`head_len`](Self::head_len). A header HTTP cannot carry (a name or value
    /// with bytes it does not allow) is left out and logged.
    pub fn into_response<B>(self, body: B) -> Response<B> {
        let mut response = Response::new(body);
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        for (name, value) in self.headers {
            match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                (Ok(name), Ok(value)) => {
                    headers.append(name, value);
                }
                _ => tracing::warn!(%name, value, "header not representable; skipped"),
            }
        }
        let len = self.head_len.unwrap_or(self.body.len() as u64);
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        response
    }
}
