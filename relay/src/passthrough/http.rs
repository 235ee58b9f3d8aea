//! Forwarding to a Cloud Storage endpoint over HTTP(S): the request as the client
//! sent it, less its `Authorization` (the relay's token) and hop-by-hop headers,
//! with the relay's bearer token when it has credentials; the answer streamed back
//! with the upstream's status and headers. A JSON answer of at most 4 MiB (a
//! resource, a list page) is read whole instead, and its `selfLink` and
//! `mediaLink` fields that point at the upstream made to point at the relay.

use http::{HeaderMap, HeaderName, header};
use http_body_util::BodyExt as _;
use object_store::gcp::GcpCredentialProvider;

use super::{Forward, PassError, PassThroughError, ResponseBody};

/// Cloud Storage's endpoint.
const CLOUD_STORAGE: &str = "https://storage.googleapis.com";

/// The largest JSON answer whose links are rewritten (object resources and list
/// pages; a larger one streams as it is).
const MAX_RELINKED_BYTES: u64 = 4 << 20;

/// Whether `answer` is JSON of a known length of at most [`MAX_RELINKED_BYTES`].
fn is_small_json(answer: &reqwest::Response) -> bool {
    let json = (answer.headers().get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let encoded = answer.headers().contains_key(header::CONTENT_ENCODING);
    json && !encoded
        && answer
            .content_length()
            .is_some_and(|len| len <= MAX_RELINKED_BYTES)
}

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
        upstream_timeout: std::time::Duration,
    ) -> Result<Self, PassThroughError> {
        let endpoint = endpoint.trim_end_matches('/');
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(PassThroughError::BadEndpoint {
                endpoint: endpoint.into(),
            });
        }
        if upstream_timeout.is_zero() {
            return Err(PassThroughError::ZeroTimeout);
        }
        // reqwest is built without a bundled TLS provider: install ring's (twice is
        // harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // reqwest's read timeout runs from the request's start to the answer's head,
        // then between two reads of its body.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT.min(upstream_timeout))
            .read_timeout(upstream_timeout)
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
        // The path built from the checked route (`target.rs`), never the client's.
        let url = match forward.uri.query() {
            Some(query) => format!("{}{}?{query}", self.endpoint, forward.path),
            None => format!("{}{}", self.endpoint, forward.path),
        };
        let mut request = self
            .client
            .request(forward.method.clone(), url)
            .headers(end_to_end(
                forward.headers,
                // reqwest sets the length of the body it sends, and the host it sends to.
                &[header::AUTHORIZATION, header::HOST, header::CONTENT_LENGTH],
            ));
        if let Some(body) = request_body(forward.headers, forward.body).await? {
            request = request.body(body);
        }
        if let Some(token) = self.bearer().await? {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await.map_err(|e| self.unreachable(e))?;
        if !is_small_json(&answer) {
            return Ok(streamed(answer));
        }
        self.relinked(answer, forward.base).await
    }

    /// Whether the upstream holds `bucket` (`GET /storage/v1/b/{bucket}`): 200 yes,
    /// 404 no, anything else `Err`.
    pub(super) async fn bucket_exists(&self, bucket: &str) -> Result<bool, String> {
        let url = format!(
            "{}/storage/v1/b/{}",
            self.endpoint,
            fake_gcs::wire::encode_component(bucket)
        );
        let answer = self.send(self.client.get(url)).await?;
        match answer.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            status => Err(format!("the upstream answered {status}")),
        }
    }

    /// The live object `name` of `bucket` (its JSON resource): size, crc32c and
    /// generation; `None` on 404.
    pub(super) async fn live_object(
        &self,
        bucket: &str,
        name: &str,
    ) -> Result<Option<super::LiveObject>, String> {
        let answer = self
            .send(self.client.get(self.object_url(bucket, name)))
            .await?;
        match answer.status().as_u16() {
            404 => return Ok(None),
            200 => {}
            status => return Err(format!("the upstream answered {status}")),
        }
        let body = answer
            .bytes()
            .await
            .map_err(|e| self.unreachable(e).to_string())?;
        let resource: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| format!("its resource is not JSON: {e}"))?;
        let text = |field: &str| resource.get(field)?.as_str().map(str::to_string);
        let size = text("size").and_then(|size| size.parse::<u64>().ok());
        Ok(Some(super::LiveObject {
            size: size.ok_or("the upstream's resource has no size")?,
            crc32c: text("crc32c"),
            generation: text("generation").and_then(|g| g.parse().ok()),
        }))
    }

    /// Deletes `name` of `bucket` if its live generation is still `generation`.
    pub(super) async fn delete_live(
        &self,
        bucket: &str,
        name: &str,
        generation: Option<i64>,
    ) -> Result<(), String> {
        let mut url = self.object_url(bucket, name);
        if let Some(generation) = generation {
            url.push_str(&format!("?ifGenerationMatch={generation}"));
        }
        let answer = self.send(self.client.delete(url)).await?;
        match answer.status().as_u16() {
            200..=299 | 404 | 412 => Ok(()),
            status => Err(format!("the upstream answered {status}")),
        }
    }

    /// The JSON API URL of object `name` of `bucket`.
    fn object_url(&self, bucket: &str, name: &str) -> String {
        use fake_gcs::wire::encode_component;
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.endpoint,
            encode_component(bucket),
            encode_component(name)
        )
    }

    /// Sends `request` with the relay's credentials.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, String> {
        let mut request = request;
        if let Some(token) = self.bearer().await.map_err(|e| e.to_string())? {
            request = request.bearer_auth(token);
        }
        (request.send().await).map_err(|e| self.unreachable(e).to_string())
    }

    /// A small JSON answer with the upstream's own links (`selfLink`, `mediaLink`)
    /// pointing at the relay (`base`) instead, so a client that follows them reads
    /// through the relay too.
    async fn relinked(
        &self,
        answer: reqwest::Response,
        base: &str,
    ) -> Result<http::Response<ResponseBody>, PassError> {
        let status = answer.status();
        let mut headers = end_to_end(answer.headers(), &[]);
        let body = answer.bytes().await.map_err(|e| self.unreachable(e))?;
        let body = match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(mut json) => {
                self.relink(&mut json, base);
                bytes::Bytes::from(json.to_string())
            }
            Err(_) => body,
        };
        headers.insert(header::CONTENT_LENGTH, body.len().into());
        let mut response = http::Response::new(super::whole(body));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
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

    /// What failed, without the request's URL (its query may hold an API key).
    fn unreachable(&self, error: reqwest::Error) -> PassError {
        let timed_out = error.is_timeout();
        let error = error.without_url();
        let mut reason = match timed_out {
            true => format!("no answer within the upstream timeout ({error})"),
            false => error.to_string(),
        };
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            reason = format!("{reason}: {cause}");
            source = cause.source();
        }
        PassError::Unreachable {
            upstream: self.endpoint.clone(),
            reason,
        }
    }

    /// Every `selfLink` and `mediaLink` in `json` (a resource, or a list page's
    /// items) that points at the upstream made to point at `base`.
    fn relink(&self, json: &mut serde_json::Value, base: &str) {
        match json {
            serde_json::Value::Object(fields) => {
                for (key, value) in fields.iter_mut() {
                    match (key.as_str(), value) {
                        ("selfLink" | "mediaLink", serde_json::Value::String(link)) => {
                            if let Some(path) = self.upstream_path(link) {
                                *link = format!("{base}{path}");
                            }
                        }
                        (_, value) => self.relink(value, base),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                items.iter_mut().for_each(|item| self.relink(item, base));
            }
            _ => {}
        }
    }

    /// The path of `link` when it points at the upstream (Cloud Storage links its
    /// resources at www.googleapis.com).
    fn upstream_path<'a>(&self, link: &'a str) -> Option<&'a str> {
        let path = link.strip_prefix(self.endpoint.as_str());
        let path = match self.endpoint == CLOUD_STORAGE {
            true => path.or_else(|| link.strip_prefix("https://www.googleapis.com")),
            false => path,
        };
        path.filter(|path| path.starts_with('/'))
    }
}

/// The request's body as the client declared it: none when its head declares
/// none (no `Content-Length`, or 0, and no `Transfer-Encoding`), whatever the
/// method; otherwise read whole (at most 64 KiB: metadata, compose and rewrite
/// requests) and sent with its own length. A `GET` or `DELETE` that declares one is
/// sent with it, as Cloud Storage would have been.
async fn request_body(
    headers: &HeaderMap,
    body: crate::body::Pieces,
) -> Result<Option<reqwest::Body>, PassError> {
    let declared_length = (headers.get(header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    if !chunked && declared_length.unwrap_or(0) == 0 {
        return Ok(None);
    }
    let bytes = body
        .limited(crate::body::MAX_RESOURCE_BYTES)
        .whole()
        .await
        .map_err(|e| PassError::Refused(e.rejection()))?;
    Ok(Some(reqwest::Body::from(bytes)))
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
    fn links_to_the_upstream_become_links_to_the_relay() {
        let relinked = |upstream: &HttpUpstream, json: serde_json::Value| {
            let mut json = json;
            upstream.relink(&mut json, "http://localhost:4443");
            json
        };
        let timeout = super::super::DEFAULT_UPSTREAM_TIMEOUT;
        let fake = HttpUpstream::new("http://127.0.0.1:9000", None, timeout).unwrap();
        let page = serde_json::json!({"items": [{
            "selfLink": "http://127.0.0.1:9000/storage/v1/b/b/o/a",
            "name": "http://127.0.0.1:9000/x",
            "metadata": {"mediaLink": 7},
        }]});
        let expected = serde_json::json!({"items": [{
            "selfLink": "http://localhost:4443/storage/v1/b/b/o/a",
            "name": "http://127.0.0.1:9000/x",
            "metadata": {"mediaLink": 7},
        }]});
        assert_eq!(relinked(&fake, page), expected);
        let gcs = HttpUpstream::new(CLOUD_STORAGE, None, timeout).unwrap();
        let resource = serde_json::json!({
            "selfLink": "https://www.googleapis.com/storage/v1/b/b/o/a",
            "mediaLink": "https://storage.googleapis.com/download/storage/v1/b/b/o/a?alt=media",
        });
        let expected = serde_json::json!({
            "selfLink": "http://localhost:4443/storage/v1/b/b/o/a",
            "mediaLink": "http://localhost:4443/download/storage/v1/b/b/o/a?alt=media",
        });
        assert_eq!(relinked(&gcs, resource), expected);
    }

    #[test]
    fn an_endpoint_must_be_http_or_https() {
        let timeout = super::super::DEFAULT_UPSTREAM_TIMEOUT;
        assert!(HttpUpstream::new("127.0.0.1:4443", None, timeout).is_err());
        let zero = std::time::Duration::ZERO;
        assert!(HttpUpstream::new("http://127.0.0.1:4443", None, zero).is_err());
        let upstream = HttpUpstream::new("http://127.0.0.1:4443/", None, timeout).unwrap();
        assert_eq!(upstream.endpoint(), "http://127.0.0.1:4443");
    }
}
