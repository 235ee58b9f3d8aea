//! Shared by the integration tests: a clock the test moves, the fake on a real
//! loopback port, raw HTTP requests, and `object_store`'s GCS client.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use fake_gcs::{FakeGcs, FakeGcsConfig, SimClock};
use http::Method;
use object_store::ObjectStore;
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
use object_store::{ClientOptions, RetryConfig, StaticCredentialProvider};

pub const BUCKET: &str = "bkt";
/// 2026-10-08T11:00:00Z.
pub const EPOCH_MS: u64 = 1_791_457_200_000;

/// A clock that moves only when the test says so.
#[derive(Debug, Default)]
pub struct ManualClock {
    elapsed_ms: AtomicU64,
}

impl ManualClock {
    pub fn advance(&self, by: Duration) {
        self.elapsed_ms
            .fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl SimClock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_millis(self.elapsed_ms.load(Ordering::SeqCst))
    }

    fn now_unix_ms(&self) -> u64 {
        EPOCH_MS + self.elapsed_ms.load(Ordering::SeqCst)
    }
}

/// A configuration with [`BUCKET`] and `keep_bytes`.
pub fn config(keep_bytes: bool) -> FakeGcsConfig {
    FakeGcsConfig {
        buckets: vec![BUCKET.to_string()],
        keep_bytes,
        ..FakeGcsConfig::default()
    }
}

/// The fake, on its clock, served on 127.0.0.1 with an OS-chosen port; returns it
/// and its base URL.
pub async fn serve(fake: &FakeGcs) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fake.clone().serve_tcp(listener));
    base
}

/// A fake with a [`ManualClock`], served; returns the fake, the clock and the URL.
pub async fn manual_fake(config: FakeGcsConfig) -> (FakeGcs, Arc<ManualClock>, String) {
    let clock = Arc::new(ManualClock::default());
    let fake = FakeGcs::new(config, clock.clone()).unwrap();
    let base = serve(&fake).await;
    (fake, clock, base)
}

/// A response read whole.
pub type Raw = http::Response<Bytes>;

/// Reading a [`Raw`] response in assertions.
pub trait Read {
    /// The body as JSON; panics with the body when it is not.
    fn json(&self) -> serde_json::Value;
    /// The body as text.
    fn text(&self) -> String;
    /// A header's value, when it is text.
    fn header(&self, name: &str) -> Option<&str>;
}

impl Read for Raw {
    fn json(&self) -> serde_json::Value {
        let body = self.body();
        serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(body)))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(self.body()).into_owned()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers().get(name).and_then(|v| v.to_str().ok())
    }
}

/// One request to `base` (reqwest, plain HTTP), read whole.
pub async fn send(
    base: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Raw {
    try_send(base, method, path, headers, body)
        .await
        .expect("the fake answers")
}

/// One request to `base`, read whole; the client's error when the connection
/// breaks before the whole answer arrives.
pub async fn try_send(
    base: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Result<Raw, reqwest::Error> {
    install_crypto();
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .body(body.into());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await?;
    let (status, headers) = (response.status(), response.headers().clone());
    let mut raw = Raw::new(response.bytes().await?);
    *raw.status_mut() = status;
    *raw.headers_mut() = headers;
    Ok(raw)
}

/// reqwest is built without a bundled TLS provider, and building a client needs
/// one installed even for plain HTTP; installing twice is harmless.
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `object_store`'s GCS client against `base`, as the spool builds it: no
/// credentials and none of the client's own retries.
pub fn gcs_store(base: &str) -> Arc<dyn ObjectStore> {
    install_crypto();
    let store = GoogleCloudStorageBuilder::new()
        .with_bucket_name(BUCKET)
        .with_base_url(base)
        .with_credentials(Arc::new(StaticCredentialProvider::new(GcpCredential {
            bearer: String::new(),
        })))
        .with_retry(RetryConfig {
            max_retries: 0,
            ..Default::default()
        })
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    Arc::new(store)
}

/// `Content-Type: application/json`.
pub const JSON: (&str, &str) = ("content-type", "application/json");

/// `method path` at `base` with the JSON `body` (no body for `Value::Null`).
pub async fn call(base: &str, method: Method, path: &str, body: serde_json::Value) -> Raw {
    let body = match body {
        serde_json::Value::Null => String::new(),
        body => body.to_string(),
    };
    send(base, method, path, &[JSON], body).await
}

/// `response`'s status is `status`; its JSON body (`null` for another body).
pub fn expect(response: &Raw, status: http::StatusCode) -> serde_json::Value {
    assert_eq!(response.status(), status, "{}", response.text());
    let json = (response.header("content-type")).is_some_and(|t| t.contains("json"));
    match json {
        true => response.json(),
        false => serde_json::Value::Null,
    }
}

/// A multipart upload to `bucket` of the JSON object `resource` and the bytes
/// `hello`, with `query` added to its path (`&name=value...`).
pub async fn upload_described(
    base: &str,
    bucket: &str,
    query: &str,
    resource: serde_json::Value,
) -> Raw {
    const BOUNDARY: &str = "b0undary";
    let body = format!(
        "--{BOUNDARY}\r\ncontent-type: application/json\r\n\r\n{resource}\r\n\
         --{BOUNDARY}\r\ncontent-type: text/plain\r\n\r\nhello\r\n--{BOUNDARY}--\r\n"
    );
    let content_type = format!("multipart/related; boundary={BOUNDARY}");
    let path = format!("/upload/storage/v1/b/{bucket}/o?uploadType=multipart{query}");
    let headers = [("content-type", content_type.as_str())];
    send(base, Method::POST, &path, &headers, body).await
}
