//! Drain over HTTP: the fake Cloud Storage (`fake_gcs::FakeGcs`) on a loopback port in
//! this process, and a spool of 10k entries of 1 KiB drained through the real
//! `object_store` GCS client (built by `spool::connect` with an emulator endpoint: reqwest, plain HTTP,
//! its retries off) with 1, 4 and 16 workers; each iteration drains 500 entries and is
//! timed, the spool is refilled between iterations (untimed).
//!
//! Beside each, two loops without the spool, 500 objects per iteration, the same
//! 1 KiB bodies, as many concurrent tasks as workers:
//! - `put_loop`: `object_store` create-if-absent puts through the same client (what
//!   the drain costs without its disk work);
//! - `bare_hyper`: the ceiling for any client, a bare hyper HTTP/1.1 PUT loop over as
//!   many keep-alive connections to the same fake, `PUT /{bucket}/{object}` with
//!   `x-goog-if-generation-match: 0` (what `object_store` sends for a create).
//!
//! Then the same drain and put loop at 16 workers against a second fake that answers
//! every write after 20 ms, about what Cloud Storage takes: there the store's latency
//! is the limit, as in production, rather than this machine's two cores.
//!
//! After the run a table gives the rates and their ratios. `DRAIN_TRACE=1` prints,
//! for every drained batch, when its last upload and its last removal finished, and
//! for every drained and `put_loop` batch the process's CPU time in it (summed over
//! many batches, CPU per entry: what the drain's disk work costs on top of the
//! client's).
//!
//! Client, server and drainer share this process's two tokio worker threads (and the
//! machine's cores): the figures are for the whole loop, not the client alone.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use benches::{
    BUCKET, Backlog, DRAIN_BATCH, DRAIN_PAYLOAD, Summary, batch_group, mark_clean, put_loop,
    run_token, start_fake, timed_batches,
};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use spool::testing::{FlakyStore, Mode};

const BACKLOG: u64 = 10_000;
const WORKERS: [usize; 3] = [1, 4, 16];
/// Store latency of the last pair, in milliseconds, and its workers.
const LATENCY_MS: u64 = 20;
const LATENCY_WORKERS: usize = 16;

fn client(addr: SocketAddr) -> Arc<FlakyStore> {
    FlakyStore::wrapping(
        spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(&format!("http://{addr}")))
            .unwrap(),
        Mode::Healthy,
    )
}

fn http(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (fake, addr) = rt.block_on(start_fake(0));
    let store = client(addr);
    let (slow_fake, slow_addr) = rt.block_on(start_fake(LATENCY_MS));
    let slow_store = client(slow_addr);

    let (mut rig, dir) = Backlog::open(&rt, "http", BACKLOG);
    let bare = BareClient {
        addr,
        token: run_token().into(),
        payload: Bytes::from(vec![0xa5; DRAIN_PAYLOAD]),
    };
    let mut bare_seq = 0u64;

    let mut group = batch_group(c, "http");
    // (suffix of the ids, store, workers): loopback at each worker count, then the
    // store answering in LATENCY_MS.
    let latency = format!("_{LATENCY_MS}ms");
    let cases = WORKERS.map(|w| ("", &store, w)).into_iter().chain([(
        latency.as_str(),
        &slow_store,
        LATENCY_WORKERS,
    )]);
    for (suffix, store, workers) in cases {
        let id = BenchmarkId::new(format!("object_store{suffix}"), workers);
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                timed_batches(iters, || {
                    rt.block_on(rig.refill());
                    rt.block_on(rig.drain(store, workers, DRAIN_BATCH))
                })
            })
        });
        let id = BenchmarkId::new(format!("put_loop{suffix}"), workers);
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                timed_batches(iters, || {
                    let first = bare_seq;
                    bare_seq += DRAIN_BATCH;
                    let cpu_at_start = benches::process_cpu();
                    let elapsed = rt.block_on(put_loop(
                        store,
                        &bare.token,
                        &bare.payload,
                        workers,
                        first..first + DRAIN_BATCH,
                    ));
                    if benches::tracing_batches() {
                        let cpu = benches::process_cpu().saturating_sub(cpu_at_start);
                        eprintln!(
                            "put_loop w={workers} took {:.1} ms cpu {} ms",
                            elapsed.as_secs_f64() * 1e3,
                            cpu.as_millis()
                        );
                    }
                    elapsed
                })
            })
        });
        if !suffix.is_empty() {
            continue;
        }
        let mut conns = rt.block_on(bare.connect(workers));
        let id = BenchmarkId::new("bare_hyper", workers);
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                timed_batches(iters, || {
                    let first = bare_seq;
                    bare_seq += DRAIN_BATCH;
                    rt.block_on(bare.put_batch(&mut conns, first))
                })
            })
        });
    }
    group.finish();

    rt.block_on(rig.refill());
    rig.assert_clean_path();
    drop(rig);
    mark_clean(&dir);
    // Every request was a create that succeeded: no 412, no error, nothing injected.
    for fake in [fake, slow_fake] {
        let stats = fake.stats();
        assert!(stats.by_status.keys().all(|&s| s == 200), "{stats:?}");
    }
}

/// HTTP/1.1 with nothing but hyper's connection API: the least any client can do.
struct BareClient {
    addr: SocketAddr,
    token: Arc<str>,
    payload: Bytes,
}

impl BareClient {
    /// `n` keep-alive connections, handshaken.
    async fn connect(&self, n: usize) -> Vec<SendRequest<Full<Bytes>>> {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(connection);
            conns.push(sender);
        }
        conns
    }

    /// Time to PUT `DRAIN_BATCH` objects, numbered from `first`, spread over `conns`
    /// (one task per connection, one request at a time on each).
    async fn put_batch(&self, conns: &mut Vec<SendRequest<Full<Bytes>>>, first: u64) -> Duration {
        let n = conns.len();
        let started = Instant::now();
        let tasks: Vec<_> = conns
            .drain(..)
            .enumerate()
            .map(|(c, mut sender)| {
                let (token, payload) = (self.token.clone(), self.payload.clone());
                let host = self.addr.to_string();
                tokio::spawn(async move {
                    for i in (c as u64..DRAIN_BATCH).step_by(n) {
                        let request =
                            http::Request::put(format!("/{BUCKET}/bare/{token}/{:010}", first + i))
                                .header(HOST, &host)
                                .header("x-goog-if-generation-match", "0")
                                .header(CONTENT_TYPE, "application/octet-stream")
                                .header(CONTENT_LENGTH, payload.len())
                                .body(Full::new(payload.clone()))
                                .unwrap();
                        sender.ready().await.unwrap();
                        let response = sender.send_request(request).await.unwrap();
                        assert_eq!(response.status(), 200);
                        response.into_body().collect().await.unwrap();
                    }
                    sender
                })
            })
            .collect();
        for task in tasks {
            conns.push(task.await.unwrap());
        }
        started.elapsed()
    }
}

fn summary(since: SystemTime) {
    let mut table = Summary::new(
        "drain over HTTP: the spool's drain, object_store's put loop, the bare hyper loop",
        "entries/s",
        since,
    );
    for workers in WORKERS {
        let w = workers.to_string();
        table = table
            .row(
                &format!("drain/bare, {w} conns"),
                ["http", "object_store", &w],
                Some(["http", "bare_hyper", &w]),
            )
            .row(
                &format!("drain/put_loop, {w}"),
                ["http", "object_store", &w],
                Some(["http", "put_loop", &w]),
            )
            .row(
                &format!("put_loop/bare, {w}"),
                ["http", "put_loop", &w],
                Some(["http", "bare_hyper", &w]),
            );
    }
    let w = LATENCY_WORKERS.to_string();
    table = table.row(
        &format!("drain/put_loop, {w}, store answering in {LATENCY_MS} ms"),
        ["http", &format!("object_store_{LATENCY_MS}ms"), &w],
        Some(["http", &format!("put_loop_{LATENCY_MS}ms"), &w]),
    );
    table.print();
}

fn main() {
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    http(&mut criterion);
    criterion.final_summary();
    summary(since);
}
