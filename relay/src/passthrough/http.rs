//! Forwarding to a Cloud Storage endpoint over HTTP(S): the request as the client
//! sent it, less its `Authorization` (the relay's token) and hop-by-hop headers,
//! with the relay's bearer token when it has credentials; the answer streamed back
//! with the upstream's status and headers.

use http::{HeaderMap, HeaderName, Method, header};
use http_body_util::BodyExt as _;
use object_store::gcp::GcpCredentialProvider;

use super::{Forward, PassError, PassThroughError, ResponseBody};

/// How long the upstream has to accept a connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A Cloud Storage endpoint and the relay's credentials for it.
pub(super) struct HttpUpstream {
    /// `scheme://host[:port]`, without a trailing slash.
    endpoint: String,
    client: reqwest::Client,
    credentials: Option<GcpCredentialProvider>,
}

impl HttpUpstream {
    pub(super) fn new(
        endpoint: &str,
        credentials: Option<GcpCredentialProvider>,
    ) -> Result<Self, PassThroughError> {
        let endpoint = endpoint.trim_end_matches('/');
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(PassThroughError::BadEndpoint {
                endpoint: endpoint.into(),
            });
        }
        // reqwest is built without a bundled TLS provider: install ring's (twice is
        // harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(Self {
            endpoint: endpoint.into(),
            client,
            credentials,
        })
    }

    pub(super) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends `forward` upstream; the upstream's answer, its body streamed.
    pub(super) async fn forward(
        &self,
        forward: Forward<'_>,
    ) -> Result<http::Response<ResponseBody>, PassError> {
        let path = forward.uri.path_and_query().map_or("/", |p| p.as_str());
        let url = format!("{}{path}", self.endpoint);
        let body = request_body(forward.method, forward.body).await?;
        let mut request = self
            .client
            .request(forward.method.clone(), url)
            .headers(end_to_end(
                forward.headers,
                &[header::AUTHORIZATION, header::HOST],
            ))
            .body(body);
        if let Some(token) = self.bearer().await? {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await.map_err(|e| self.unreachable(&e))?;
        Ok(streamed(answer))
    }

    /// The relay's bearer token, when it has credentials.
    async fn bearer(&self) -> Result<Option<String>, PassError> {
        let Some(credentials) = &self.credentials else {
            return Ok(None);
        };
        let credential =
            credentials
                .get_credential()
                .await
                .map_err(|e| PassError::Credentials {
                    upstream: self.endpoint.clone(),
                    reason: e.to_string(),
                })?;
        Ok(Some(credential.bearer.clone()))
    }

    fn unreachable(&self, error: &reqwest::Error) -> PassError {
        let mut reason = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            reason = format!("{reason}: {cause}");
            source = cause.source();
        }
        PassError::Unreachable {
            upstream: self.endpoint.clone(),
            reason,
        }
    }
}

/// The request's body: read (at most 64 KiB, metadata only) for the methods that
/// carry one, none for the others.
async fn request_body(
    method: &Method,
    body: crate::body::Pieces,
) -> Result<reqwest::Body, PassError> {
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        return Ok(reqwest::Body::from(bytes::Bytes::new()));
    }
    let bytes = body
        .limited(crate::relay::RelayConfig::MAX_RESOURCE_BYTES)
        .whole()
        .await
        .map_err(|e| PassError::Refused(crate::upload::body_rejection(e)))?;
    Ok(reqwest::Body::from(bytes))
}

/// The upstream's answer as the relay's: status, end-to-end headers, the body
/// streamed as the client reads it.
fn streamed(answer: reqwest::Response) -> http::Response<ResponseBody> {
    let answer: http::Response<reqwest::Body> = answer.into();
    let (mut parts, body) = answer.into_parts();
    parts.headers = end_to_end(&parts.headers, &[]);
    let body = body
        .map_err(|e| Box::new(e) as super::BoxError)
        .boxed_unsync();
    http::Response::from_parts(parts, body)
}

/// Headers that are hop-by-hop (RFC 9110 7.6.1), named in `Connection`, or in
/// `also`, are left out; the rest are kept.
fn end_to_end(headers: &HeaderMap, also: &[HeaderName]) -> HeaderMap {
    const HOP_BY_HOP: [&str; 8] = [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
    ];
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let hop = HOP_BY_HOP.contains(&name.as_str())
            || name == header::UPGRADE
            || named.iter().any(|n| n == name.as_str())
            || also.contains(name);
        if !hop {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_the_clients_token_stay_behind() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer relay-token"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("range", "bytes=0-9"),
            ("if-match", "\"abc\""),
            ("x-goog-if-generation-match", "7"),
        ] {
            headers.append(name, value.parse().unwrap());
        }
        let kept = end_to_end(&headers, &[header::AUTHORIZATION]);
        let mut names: Vec<&str> = kept.keys().map(|n| n.as_str()).collect();
        names.sort();
        assert_eq!(names, ["if-match", "range", "x-goog-if-generation-match"]);
    }

    #[test]
    fn an_endpoint_must_be_http_or_https() {
        assert!(HttpUpstream::new("127.0.0.1:4443", None).is_err());
        let upstream = HttpUpstream::new("http://127.0.0.1:4443/", None).unwrap();
        assert_eq!(upstream.endpoint(), "http://127.0.0.1:4443");
    }
}
