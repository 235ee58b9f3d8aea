//! Lists through `spool-relay` while it holds spooled objects (issue 52, finding 7):
//! one JSON page of 1,000 names (`GET /storage/v1/b/bench/o?prefix=o/&maxResults=
//! 1000`) through a relay in front of the fake, which holds 1,000 objects under
//! `o/`, while the relay's spool holds `0`, 12,000 or 120,000 objects it answered
//! `spooled` under the same prefix, their names between the fake's. With none
//! spooled the page passes through untouched: the baseline. With some, the relay
//! asks the fake for the page and merges the spooled names it covers: the design
//! asks that this cost O(page + log spooled), so the 120,000 row should stay near
//! the 12,000 one (before, a page cost O(spooled²): 9.3 s of CPU at 12,000).
//!
//! The spool is in memory (`spool::testing::mem_spool`), the fake fails every write
//! so that uploads are spooled, and no drainer runs. Client, relay and fake share
//! this process. After criterion's output a table gives each merged page's rate over
//! the baseline's.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use benches::{BUCKET, Summary, start_fake, started};
use criterion::{BenchmarkId, Criterion, SamplingMode};
use relay::{PassThrough, Relay, RelayConfig};
use spool::{Remote, SpoolConfig, SystemClock, Uploader, UploaderConfig};

/// The allocator `spool-relay` runs on.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Objects the fake holds, and the page size.
const IN_BUCKET: usize = 1000;

/// Spooled objects in each case (0: the pass-through baseline).
const SPOOLED: [usize; 3] = [0, 12_000, 120_000];

/// A relay in front of a fake holding [`IN_BUCKET`] objects, with `spooled`
/// objects in its (in-memory) spool; the relay's address.
async fn relay_holding(spooled: usize) -> SocketAddr {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (fake, fake_addr) = start_fake(0).await;
    let http = reqwest::Client::new();
    let fake_base = format!("http://{fake_addr}");
    for n in 0..IN_BUCKET {
        let url = format!(
            "{fake_base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=o%2F{:07}",
            n * 200
        );
        assert_eq!(http.post(url).body("x").send().await.unwrap().status(), 200);
    }
    let fail_writes = "[[fault]]\nops = \"writes\"\nmix = { \"503\" = 1.0 }\n";
    fake.add_faults(fake_gcs::FaultPlan::from_toml(fail_writes).unwrap())
        .unwrap();
    let config = SpoolConfig {
        max_files: 200_000,
        max_bytes: 1 << 30,
        ..SpoolConfig::default()
    };
    let (spool, _disk) = spool::testing::mem_spool(config).await;
    let store =
        spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(&fake_base)).unwrap();
    let uploader = Uploader::new(spool, Remote::new(store), UploaderConfig::default());
    let config = RelayConfig {
        pass_through: PassThrough::http(&fake_base, None).unwrap(),
        ..RelayConfig::new(BUCKET)
    };
    let relay = Relay::new(config, uploader, Arc::new(SystemClock)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let forever = std::future::pending::<()>();
    tokio::spawn(relay::serve(
        relay,
        listener,
        forever,
        Duration::from_secs(1),
    ));
    spool_through(&http, addr, spooled).await;
    addr
}

/// Uploads `count` objects through the relay at `addr` (each spooled: the fake
/// fails writes), 64 at a time, their names between the fake's.
async fn spool_through(http: &reqwest::Client, addr: SocketAddr, count: usize) {
    use futures::StreamExt as _;
    let uploads = futures::stream::iter(0..count).map(|n| {
        let url = format!(
            "http://{addr}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=o%2F{:07}",
            (n % IN_BUCKET) * 200 + 1 + n / IN_BUCKET
        );
        let sent = http.post(url).body("spooled").send();
        async move {
            let answer = sent.await.unwrap();
            assert_eq!(answer.status(), 200);
            assert_eq!(answer.headers()["x-spool-outcome"], "spooled");
        }
    });
    uploads.buffer_unordered(64).collect::<Vec<()>>().await;
}

/// One page of the list through the relay at `addr`: its names.
async fn page(http: &reqwest::Client, addr: SocketAddr) -> usize {
    let url = format!("http://{addr}/storage/v1/b/{BUCKET}/o?prefix=o%2F&maxResults=1000");
    let answer = http.get(url).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let page: serde_json::Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    page["items"].as_array().map_or(0, Vec::len)
}

fn main() {
    let since = started();
    // reqwest is built without a bundled TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("list");
    group
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(criterion::Throughput::Elements(1));
    let http = reqwest::Client::new();
    for spooled in SPOOLED {
        let addr = runtime.block_on(relay_holding(spooled));
        let listed = runtime.block_on(page(&http, addr));
        assert_eq!(listed, 1000, "a whole page with {spooled} spooled");
        group.bench_function(BenchmarkId::new("merged", spooled), |b| {
            b.to_async(&runtime).iter(|| page(&http, addr));
        });
    }
    group.finish();
    criterion.final_summary();
    let mut table = Summary::new(
        "a list page through the relay merged with its spool, against the same page passed \
         through with nothing spooled",
        "pages/s",
        since,
    );
    for spooled in &SPOOLED[1..] {
        let n = spooled.to_string();
        table = table.row(
            &format!("{n} spooled / none"),
            ["list", "merged", &n],
            Some(["list", "merged", "0"]),
        );
    }
    table.print();
}
