//! Writes through `spool-relay`: the same `object_store` GCS client (reqwest, plain
//! HTTP, create-if-absent, its retries off) writing 1 KiB objects straight to the
//! fake Cloud Storage on a loopback port (`direct`), and through a relay on another
//! loopback port in front of that fake (`relay`): the client's HTTP request, the
//! relay's parsing, the production `Uploader` and its own request to the fake. The
//! fake is healthy, so every write is stored upstream and the spool stays empty;
//! 1, 4 and 16 concurrent writers, 500 objects per timed iteration.
//!
//! Client, relay and fake share this process's tokio worker threads (and the
//! machine's two cores): the figures are for the whole loop, and the relay path does
//! twice the HTTP work of the direct one on the same cores. So a second pair,
//! `direct_20ms` and `relay_20ms` (16 writers), puts a fake that answers every
//! write after 20 ms, about what Cloud Storage takes, behind both: what a service
//! sees when the store, not the CPU, is the limit. After the run a table gives the
//! relay's share of the direct rate for each (issue 15 asks for at least 0.7).
//!
//! The relay's floor on loopback, `proxy`: a bare forwarding proxy on a third port in
//! front of the same fake (hyper's server reads each request whole, reqwest, the HTTP
//! client under `object_store`, sends it on with its headers, and the answer comes
//! back whole). That is what any relay must do that the direct client does not: take
//! the request in over one more connection and make it again. No parsing of the
//! upload, no spool, no `object_store`. The table's last rows give the relay's rate
//! over the proxy's: what the relay costs beyond the hop.
//!
//! Runs on mimalloc, as `spool-relay` does.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use benches::{
    BUCKET, DRAIN_BATCH, DRAIN_PAYLOAD, Summary, batch_group, run_token, scratch_root, start_fake,
    timed_batches,
};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion};
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use relay::{Relay, RelayConfig};

/// The allocator `spool-relay` runs on, so that the relay measured is the one
/// shipped (client, proxy and fake run on it too).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use spool::{
    Drainer, DrainerConfig, Remote, Spool, SpoolConfig, SystemClock, Uploader, UploaderConfig,
};

const WRITERS: [usize; 3] = [1, 4, 16];

/// Store latency of the second pair, in milliseconds.
const LATENCY_MS: u64 = 20;

/// The client a service would use, pointed at `endpoint`.
fn client(endpoint: SocketAddr) -> Arc<dyn ObjectStore> {
    spool::connect::store_from_url(
        &format!("gs://{BUCKET}"),
        Some(&format!("http://{endpoint}")),
    )
    .unwrap()
}

/// Starts a relay with its spool in a fresh directory under the bench scratch root,
/// writing to the fake at `upstream`, as `spool-relay` does; returns its address.
async fn start_relay(upstream: SocketAddr, dir: &std::path::Path) -> SocketAddr {
    let spool = Spool::open(dir, SpoolConfig::default()).await.unwrap();
    let remote = Remote::new(client(upstream));
    let drainer = Drainer::start(spool.clone(), remote.clone(), DrainerConfig::default());
    std::mem::forget(drainer); // runs until the process ends, as the relay's does
    let uploader = Uploader::new(spool, remote, UploaderConfig::default());
    let relay = Relay::new(RelayConfig::new(BUCKET), uploader, Arc::new(SystemClock)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let forever = std::future::pending::<()>();
    tokio::spawn(relay::serve(
        relay,
        listener,
        forever,
        Duration::from_secs(1),
    ));
    addr
}

/// Starts the bare forwarding proxy in front of the fake at `upstream`; returns its
/// address.
async fn start_proxy(upstream: SocketAddr) -> SocketAddr {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let http = reqwest::Client::builder().build().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let http = http.clone();
            let forward =
                hyper::service::service_fn(move |request| forward(http.clone(), upstream, request));
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), forward),
            );
        }
    });
    addr
}

/// Headers a proxy does not pass on: the connection's own, and the framing, which
/// each side sets for its own body.
const HOP_BY_HOP: [http::HeaderName; 4] = [
    http::header::HOST,
    http::header::CONNECTION,
    http::header::CONTENT_LENGTH,
    http::header::TRANSFER_ENCODING,
];

/// One request to the fake at `upstream` and its answer, each read whole.
async fn forward(
    http: reqwest::Client,
    upstream: SocketAddr,
    request: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<http_body_util::Full<Bytes>>, hyper::Error> {
    use http_body_util::BodyExt;
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut sent = http.request(parts.method, format!("http://{upstream}{target}"));
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(name) {
            sent = sent.header(name, value);
        }
    }
    let answer = sent.body(body).send().await.expect("the fake answers");
    let mut response = http::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(name) {
            response = response.header(name, value);
        }
    }
    let bytes = answer.bytes().await.expect("the fake's answer arrives");
    Ok(response.body(http_body_util::Full::new(bytes)).unwrap())
}

/// Time to write `DRAIN_BATCH` objects named `{prefix}/{first + i}` through `store`
/// from `writers` concurrent tasks, one create-if-absent put at a time each.
async fn write_batch(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    writers: usize,
    first: u64,
) -> Duration {
    let payload = Bytes::from(vec![0x5a; DRAIN_PAYLOAD]);
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers as u64)
        .map(|w| {
            let (store, payload, prefix) = (store.clone(), payload.clone(), prefix.to_string());
            tokio::spawn(async move {
                for i in (w..DRAIN_BATCH).step_by(writers) {
                    let path = Path::from(format!("{prefix}/{:010}", first + i));
                    let options = PutOptions {
                        mode: PutMode::Create,
                        ..PutOptions::default()
                    };
                    let put = PutPayload::from_bytes(payload.clone());
                    store.put_opts(&path, put, options).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

fn relay(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let token = run_token();
    let dirs = [0, LATENCY_MS].map(|ms| scratch_root().join(format!("relay-{token}-{ms}")));
    let [
        (fake, direct, relay, proxy),
        (slow_fake, slow_direct, slow_relay, _),
    ] = [0, LATENCY_MS].map(|ms| {
        rt.block_on(async {
            let (fake, fake_addr) = start_fake(ms).await;
            let relay_addr = start_relay(fake_addr, &dirs[(ms > 0) as usize]).await;
            let proxy_addr = start_proxy(fake_addr).await;
            let clients = [fake_addr, relay_addr, proxy_addr].map(client);
            let [direct, relay, proxy] = clients;
            (fake, direct, relay, proxy)
        })
    });
    let pairs = [
        ("direct", direct, WRITERS.as_slice()),
        ("relay", relay, WRITERS.as_slice()),
        ("proxy", proxy, WRITERS.as_slice()),
        ("direct_20ms", slow_direct, &[16][..]),
        ("relay_20ms", slow_relay, &[16][..]),
    ];
    let mut next = 0u64;

    let mut group = batch_group(c, "relay");
    for (label, store, writer_counts) in &pairs {
        for &writers in *writer_counts {
            let id = BenchmarkId::new(*label, writers);
            let prefix = format!("{token}/{label}");
            group.bench_with_input(id, &writers, |b, &writers| {
                b.iter_custom(|iters| {
                    timed_batches(iters, || {
                        let first = next;
                        next += DRAIN_BATCH;
                        rt.block_on(write_batch(store, &prefix, writers, first))
                    })
                })
            });
        }
    }
    group.finish();
    // Every write was a create that succeeded upstream: nothing was spooled.
    for fake in [fake, slow_fake] {
        let stats = fake.stats();
        assert!(stats.by_status.keys().all(|&s| s == 200), "{stats:?}");
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn summary(since: SystemTime) {
    let mut table = Summary::new(
        "writes through spool-relay against the same client straight to the fake",
        "writes/s",
        since,
    );
    for writers in WRITERS {
        let w = writers.to_string();
        table = table.row(
            &format!("relay/direct, {w} writers"),
            ["relay", "relay", &w],
            Some(["relay", "direct", &w]),
        );
    }
    table = table.row(
        &format!("relay/direct, store answering in {LATENCY_MS} ms, 16 writers"),
        ["relay", "relay_20ms", "16"],
        Some(["relay", "direct_20ms", "16"]),
    );
    for writers in WRITERS {
        let w = writers.to_string();
        table = table.row(
            &format!("proxy/direct, {w} writers (the floor: one more hop)"),
            ["relay", "proxy", &w],
            Some(["relay", "direct", &w]),
        );
        table = table.row(
            &format!("relay/proxy, {w} writers (the relay beyond the hop)"),
            ["relay", "relay", &w],
            Some(["relay", "proxy", &w]),
        );
    }
    table.print();
}

fn main() {
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    relay(&mut criterion);
    criterion.final_summary();
    summary(since);
}
