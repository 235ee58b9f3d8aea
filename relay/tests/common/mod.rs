//! What the relay's tests share: a fake Cloud Storage on a real loopback port, a
//! relay in front of it (the production spool, uploader and drainer, the
//! production `object_store` GCS client from `spool::connect`), an HTTP client,
//! and request builders for each kind of upload.
#![allow(dead_code)] // each test file uses part of it

use std::io::BufRead as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fake_gcs::{FakeGcs, FakeGcsConfig, FaultPlan, TokioClock};
use object_store::ObjectStore;
use relay::{Relay, RelayConfig};
use spool::{
    BackoffConfig, Drainer, DrainerConfig, Remote, Spool, SpoolConfig, SystemClock, Uploader,
    UploaderConfig,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The bucket the fake holds and the relay writes to.
pub const BUCKET: &str = "bkt";

/// How long a test waits for a condition (the drain, a response) before failing.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A fake on 127.0.0.1:0 that keeps bytes, with [`BUCKET`]; and its base URL.
pub async fn real_fake() -> (FakeGcs, String) {
    let config = FakeGcsConfig {
        buckets: vec![BUCKET.to_string()],
        keep_bytes: true,
        ..FakeGcsConfig::default()
    };
    let fake = FakeGcs::new(config, Arc::new(TokioClock::start())).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fake.clone().serve_tcp(listener));
    (fake, base)
}

/// Every write the fake serves fails with 503, until [`FakeGcs::clear_faults`].
pub fn fail_writes(fake: &FakeGcs) {
    let plan = FaultPlan::from_toml("[[fault]]\nops = \"writes\"\nmix = { \"503\" = 1.0 }\n");
    fake.add_faults(plan.unwrap()).unwrap();
}

/// A relay in front of the fake at `fake_base` that passes everything but
/// uploads through to it; objects of up to 1 MiB.
pub async fn passing_through(fake_base: &str) -> Harness {
    passing_through_up_to(fake_base, 1 << 20).await
}

/// [`passing_through`], taking objects of up to `max_object_bytes`.
pub async fn passing_through_up_to(fake_base: &str, max_object_bytes: u64) -> Harness {
    let config = RelayConfig {
        max_object_bytes: Some(max_object_bytes),
        pass_through: relay::PassThrough::http(fake_base, None).unwrap(),
        ..RelayConfig::new(BUCKET)
    };
    let setup = Setup {
        relay: Some(config),
        ..Setup::default()
    };
    Harness::in_front_of(fake_base, setup).await
}

/// Sends `method target` to `base` exactly as written (no client resolves its
/// path), with `body` (and its `Content-Length`, whatever the method); the status
/// and the answer's body.
pub async fn raw(base: &str, method: &str, target: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = base.strip_prefix("http://").unwrap();
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(PATIENCE, conn.read_to_end(&mut answer));
    read.await.expect("answered").unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// A relay writing to `store` with no server and no drainer, for tests that feed
/// `relay::Connections` in-memory streams (under paused time): the relay, its spool
/// and the spool's directory (deleted when dropped).
pub async fn relay_without_server(
    store: Arc<dyn ObjectStore>,
) -> (Relay, Spool, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let uploader = Uploader::new(spool.clone(), Remote::new(store), UploaderConfig::default());
    let config = RelayConfig {
        max_object_bytes: Some(1 << 20),
        ..RelayConfig::new(BUCKET)
    };
    let relay = Relay::new(config, uploader, Arc::new(SystemClock)).unwrap();
    (relay, spool, dir)
}

/// A relay with `config` over the spool in `dir` (which outlives it, for a restart)
/// in front of the fake at `fake_base`.
pub async fn relay_on(dir: &std::path::Path, fake_base: &str, config: RelayConfig) -> Harness {
    let store = spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(fake_base)).unwrap();
    let setup = Setup {
        relay: Some(config),
        ..Setup::default()
    };
    Harness::in_dir(dir, store, setup).await
}

/// Files in the spool's `entries/` (entries and temporary files alike).
pub fn entry_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir.join(spool::layout::ENTRIES_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Sends raw HTTP/1.1 `request` bytes over an in-memory connection served by
/// `connections`, then half-closes when `close_after` is set; the bytes the relay
/// sends back until it closes the connection.
pub async fn exchange(
    connections: &relay::Connections,
    request: &[u8],
    close_after: bool,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server) = tokio::io::duplex(1 << 16);
    connections.serve_connection(server).await;
    client.write_all(request).await.unwrap();
    if close_after {
        client.shutdown().await.unwrap();
    }
    let mut answer = Vec::new();
    let _ = client.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A relay on a real loopback port, and what a test inspects of it.
pub struct Harness {
    /// `http://127.0.0.1:PORT` of the relay.
    pub base: String,
    pub relay: Relay,
    pub spool: Spool,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    pub server: JoinHandle<()>,
    drainer: Option<Drainer>,
    _dir: Option<tempfile::TempDir>,
}

/// Settings a test may change.
#[derive(Default)]
pub struct Setup {
    pub spool: SpoolConfig,
    pub uploader: UploaderConfig,
    /// The relay's configuration; by default 1 MiB objects and 4 sessions.
    pub relay: Option<RelayConfig>,
    /// The spool's disk; by default the real one.
    pub disk: Option<Arc<dyn spool::Disk>>,
}

impl Harness {
    /// A relay in front of the fake at `fake_base`, through the production GCS
    /// client.
    pub async fn in_front_of(fake_base: &str, setup: Setup) -> Harness {
        let url = format!("gs://{BUCKET}");
        let store = spool::connect::store_from_url(&url, Some(fake_base)).unwrap();
        Harness::writing_to(store, setup).await
    }

    /// A relay writing to `store`, with a drainer that retries within 50 ms.
    pub async fn writing_to(store: Arc<dyn ObjectStore>, setup: Setup) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut harness = Harness::in_dir(dir.path(), store, setup).await;
        harness._dir = Some(dir);
        harness
    }

    /// A relay over the spool in `dir` writing to `store`.
    pub async fn in_dir(
        dir: &std::path::Path,
        store: Arc<dyn ObjectStore>,
        setup: Setup,
    ) -> Harness {
        let disk = setup.disk.unwrap_or_else(|| Arc::new(spool::StdDisk));
        let clock = Arc::new(SystemClock);
        let metrics = spool::Metrics::default();
        let opened = Spool::open_with(dir, setup.spool, disk, clock, metrics).await;
        let spool = opened.unwrap().0;
        let remote = Remote::new(store);
        let drainer_config = DrainerConfig {
            workers: 2,
            backoff: BackoffConfig {
                base: Duration::from_millis(10),
                cap: Duration::from_millis(50),
                ..BackoffConfig::default()
            },
            rng_seed: Some(7),
            ..DrainerConfig::default()
        };
        let drainer = Drainer::start(spool.clone(), remote.clone(), drainer_config);
        let uploader = Uploader::new(spool.clone(), remote, setup.uploader);
        let config = setup.relay.unwrap_or(RelayConfig {
            max_object_bytes: Some(1 << 20),
            max_sessions: 4,
            ..RelayConfig::new(BUCKET)
        });
        let relay = Relay::new(config, uploader, Arc::new(SystemClock)).unwrap();
        // reqwest is built without a bundled TLS provider (twice is harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let grace = Duration::from_secs(30);
        // Idle connections close at once when told to stop, so that a test's
        // pooled ones do not hold its end for the linger (server.rs tests it).
        let config = relay::ServerConfig {
            stop_linger: Duration::ZERO,
            ..relay::ServerConfig::default()
        };
        let serving = relay::serve_with(relay.clone(), listener, shutdown, grace, config);
        let server = tokio::spawn(async move { serving.await.unwrap() });
        Harness {
            base,
            relay,
            spool,
            http: reqwest::Client::new(),
            stop: Some(stop),
            server,
            drainer: Some(drainer),
            _dir: None,
        }
    }

    /// Asks the server to stop (as SIGTERM does); [`Harness::stopped`] waits for it.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits for the server to finish its requests in flight, then stops the
    /// drainer.
    pub async fn stopped(mut self) {
        self.stop();
        tokio::time::timeout(PATIENCE, &mut self.server)
            .await
            .expect("the server stops")
            .unwrap();
        if let Some(drainer) = self.drainer.take() {
            drainer.shutdown().await;
        }
    }

    /// Waits until the drainer has delivered (or set aside) every spooled entry.
    pub async fn drained(&self) {
        tokio::time::timeout(PATIENCE, self.spool.wait_until_empty())
            .await
            .expect("the spool drains");
    }

    /// `POST /upload/storage/v1/b/{bucket}/o?{query}` with `body`.
    pub fn upload(&self, bucket: &str, query: &str) -> reqwest::RequestBuilder {
        let url = format!("{}/upload/storage/v1/b/{bucket}/o?{query}", self.base);
        self.http.post(url)
    }

    /// `uploadType=media` of `data` as `name` (percent-encoded here).
    pub async fn media(&self, name: &str, data: &[u8]) -> reqwest::Response {
        let query = format!("uploadType=media&ifGenerationMatch=0&name={}", encode(name));
        self.upload(BUCKET, &query)
            .header("content-type", "text/plain")
            .body(data.to_vec())
            .send()
            .await
            .unwrap()
    }

    /// `uploadType=multipart` of `data` with the JSON `resource`.
    pub async fn multipart(&self, resource: serde_json::Value, data: &[u8]) -> reqwest::Response {
        let body = multipart_body(&resource, data);
        self.upload(BUCKET, "uploadType=multipart")
            .header("content-type", "multipart/related; boundary=b0undary")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// XML `PUT /{bucket}/{name}`.
    pub fn xml_put(&self, name: &str, data: &[u8]) -> reqwest::RequestBuilder {
        let url = format!("{}/{BUCKET}/{}", self.base, encode(name));
        self.http.put(url).body(data.to_vec())
    }

    /// A resumable upload of `data` as `name`, in two requests split at `split`:
    /// the second request's answer.
    pub async fn resumable(&self, name: &str, data: &[u8], split: usize) -> reqwest::Response {
        let location = self.start_resumable(name).await;
        let first = self
            .http
            .put(&location)
            .header("content-range", format!("bytes 0-{}/*", split - 1))
            .body(data[..split].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 308, "{:?}", first.text().await);
        assert_eq!(
            first.headers()["range"],
            format!("bytes=0-{}", split - 1).as_str()
        );
        let last = format!("bytes {split}-{}/{}", data.len() - 1, data.len());
        self.http
            .put(&location)
            .header("content-range", last)
            .body(data[split..].to_vec())
            .send()
            .await
            .unwrap()
    }

    /// Opens a resumable session for `name`: its URL.
    pub async fn start_resumable(&self, name: &str) -> String {
        let query = format!(
            "uploadType=resumable&ifGenerationMatch=0&name={}",
            encode(name)
        );
        let start = self
            .upload(BUCKET, &query)
            .header("x-upload-content-type", "application/x-ndjson")
            .send()
            .await
            .unwrap();
        assert_eq!(start.status(), 200, "{:?}", start.text().await);
        let location = start.headers()["location"].to_str().unwrap().to_string();
        assert!(location.starts_with(&self.base), "{location}");
        location
    }
}

/// A `multipart/related` body: the JSON resource, then the media.
pub fn multipart_body(resource: &serde_json::Value, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"--b0undary\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n");
    body.extend_from_slice(resource.to_string().as_bytes());
    body.extend_from_slice(b"\r\n--b0undary\r\ncontent-type: text/csv\r\n\r\n");
    body.extend_from_slice(data);
    body.extend_from_slice(b"\r\n--b0undary--\r\n");
    body
}

/// Every byte but unreserved ones percent-encoded.
pub fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The body, as JSON.
pub async fn body_json(response: reqwest::Response) -> serde_json::Value {
    let body = response.bytes().await.unwrap();
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

/// The answer's `x-spool-outcome`.
pub fn outcome(response: &reqwest::Response) -> &str {
    response
        .headers()
        .get(relay::OUTCOME_HEADER)
        .map_or("", |v| v.to_str().unwrap())
}

/// What the fake holds under `name`: its bytes.
pub fn stored(fake: &FakeGcs, name: &str) -> Option<Bytes> {
    fake.object_bytes(BUCKET, name)
}

/// A spool-relay process's log lines (its standard output, and that of the
/// processes it hands its socket to), as they come; the channel closes when the
/// output is closed (every process writing it exited).
pub fn log_lines(child: &mut std::process::Child) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (lines, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::task::spawn_blocking(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The first log line containing `text`, waiting for it.
pub async fn line_with(
    log: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    text: &str,
) -> String {
    let wait = async {
        while let Some(line) = log.recv().await {
            if line.contains(text) {
                return line;
            }
        }
        panic!("spool-relay's log ended without a line with {text:?}");
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .unwrap_or_else(|_| panic!("no log line with {text:?}"))
}
