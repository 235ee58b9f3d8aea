//! Shared by the integration tests: a fake on a real loopback port, a turmoil world
//! with the fake as a host, and a raw HTTP client for requests built by hand.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use fake_gcs::{FakeGcs, FakeGcsConfig, FaultPlan, RequestEvent, TokioClock};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use object_store::client::{HttpRequestBody, HttpService};
use sim::connector::TurmoilHttp;
use sim::hosts::gcs::{self as gcs_host, TurmoilClock};

pub const BUCKET: &str = "bkt";
/// 2026-10-08T11:00:00Z, the start of the outage the bench replays.
pub const EPOCH_MS: u64 = 1_791_457_200_000;
pub const GCS_URL: &str = "http://gcs:4443";

pub fn config(keep_bytes: bool, faults: FaultPlan) -> FakeGcsConfig {
    FakeGcsConfig {
        buckets: vec![BUCKET.to_string()],
        keep_bytes,
        seed: 42,
        faults,
        ..FakeGcsConfig::default()
    }
}

pub fn plan(toml: &str) -> FaultPlan {
    FaultPlan::from_toml(toml).unwrap()
}

/// A fake on 127.0.0.1 with an OS-chosen port; returns it and its base URL.
pub async fn real_fake(config: FakeGcsConfig) -> (FakeGcs, String) {
    let fake = FakeGcs::new(config, Arc::new(TokioClock::start())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fake.clone().serve_tcp(listener));
    (fake, base)
}

/// `object_store`'s own GCS client (reqwest) over plain HTTP against `base_url`,
/// built as a user's would be: `spool::connect` with an emulator endpoint.
pub fn gcs_store_http(
    base_url: &str,
    bucket: &str,
) -> Result<Arc<dyn object_store::ObjectStore>, spool::connect::ConnectError> {
    spool::connect::store_from_url(&format!("gs://{bucket}"), Some(base_url))
}

/// A fake for turmoil; serve it with [`world`].
pub fn turmoil_fake(config: FakeGcsConfig) -> FakeGcs {
    FakeGcs::new(config, Arc::new(TurmoilClock::new())).unwrap()
}

/// A turmoil world (10 ms tick, fixed epoch and seed) with `fake` serving on
/// `gcs:4443`.
/// The spool's production sink, through the turmoil connector, against [`GCS_URL`].
pub fn remote() -> spool::Remote {
    spool::Remote::new(sim::connector::gcs_store(GCS_URL, BUCKET).unwrap())
}

pub fn world(fake: &FakeGcs, seed: u64) -> turmoil::Sim<'static> {
    let mut sim = turmoil::Builder::new()
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_MS))
        .rng_seed(seed)
        .tick_duration(Duration::from_millis(10))
        .simulation_duration(Duration::from_secs(7200))
        .build();
    let fake = fake.clone();
    sim.host("gcs", move || {
        let fake = fake.clone();
        async move {
            gcs_host::serve(fake, 4443).await?;
            Ok(())
        }
    });
    sim
}

/// Collects every request event the fake reports.
pub fn record_events(fake: &FakeGcs) -> Arc<Mutex<Vec<RequestEvent>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    fake.set_observer(Arc::new(move |e: &RequestEvent| {
        sink.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e.clone())
    }));
    events
}

/// A response read whole.
#[derive(Debug)]
pub struct Raw {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Raw {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends a request over a fresh real TCP connection. `chunks` of the body are sent
/// with `Transfer-Encoding: chunked` (no length is known up front).
pub async fn send_real(
    base: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    chunks: Vec<Bytes>,
) -> Result<Raw, hyper::Error> {
    let authority = base.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", authority);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let frames = futures::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(c))),
    );
    let response = sender
        .send_request(req.body(StreamBody::new(frames)).unwrap())
        .await?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Raw {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// Sends a request inside turmoil through the connector.
pub async fn send_turmoil(
    client: &TurmoilHttp,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Raw, object_store::client::HttpError> {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("{GCS_URL}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(HttpRequestBody::from(Bytes::copy_from_slice(body)))
        .unwrap();
    let response = client.call(req).await?;
    let (parts, body) = response.into_parts();
    let body = body.bytes().await?;
    Ok(Raw {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}
