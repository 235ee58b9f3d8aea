//! `spool-relay` under load on real ports: the release binary in front of the
//! `fake-gcs` binary (which keeps digests only, `--drop-bytes`), on loopback, with
//! its spool on the bench's scratch directory. Phases, each bounded in count and
//! time, in one run:
//!
//! - `many`: 256 clients at once, each 8 JSON media uploads of 256 KiB;
//! - `slow`: 64 clients sending a 64 KiB body 4 KiB at a time, 250 ms apart;
//! - `oversized`: 16 uploads declaring 3 GiB that send 8 MiB and go away, and 16
//!   XML `PUT`s over the relay's `--max-object-bytes`;
//! - `lying`: 16 requests whose body is half its `Content-Length`, then a close;
//! - `big`: two 1 GiB media uploads at once, generated as they are sent;
//! - `drain`: on a second relay with the default flags but `--max-bytes 20GiB`
//!   (the spool must hold them: `--max-object-bytes` defaults to what it holds),
//!   four media uploads of 4 GiB (`RELAY_LOAD_DRAIN_GIB`) while the fake fails
//!   every write, so that all four are spooled; then the fake heals and the
//!   relay's four drain workers stream them out (`remote/streamed.rs`). Its peak
//!   RSS is sampled during the drain alone, against the budget of 256 MiB, and
//!   each object's size and crc32c in the fake are checked against what was sent.
//! - `lists` (`RELAY_LOAD_LISTS=0` skips it): 128 list pages of about 8 MB at once
//!   through a relay holding a spooled object, so that each is merged: the relay's
//!   peak RSS.
//! - `download`: a second fake that keeps bytes, an object of 4 GiB
//!   (`RELAY_LOAD_DOWNLOAD_GIB`) written into it through one relay, then read back
//!   through a fresh relay with the default flags (reads pass through, streamed):
//!   that relay's peak RSS during a 1 MiB download and during the 4 GiB one,
//!   beside the download's size, and the bytes' crc32c checked against what was
//!   sent.
//!
//! A sampler reads the relay's `/proc/PID/status` (`VmRSS`, `VmHWM`) and counts
//! `/proc/PID/fd` every 50 ms. At the end the spool must drain, `spool_broken` stay
//! 0 and every request get an answer (or, for the ones that go away, a closed
//! connection). Printed: answers per phase, the `many` phase's throughput, peak RSS
//! and open descriptors.
//!
//! With `RELAY_LOAD_BASELINE=/path/to/another/spool-relay` the `many` phase also
//! runs against that binary, in turn with this one (three pairs), and the ratio of
//! their throughputs is printed: how to compare today's streaming relay with an
//! older build.
//!
//! Run: `cargo bench -p benches --bench relay_load`.
#![allow(clippy::disallowed_methods)] // benches measure real time, and sample on a thread

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;

const BUCKET: &str = "bench";
/// Largest object the relay under test takes.
const MAX_OBJECT_BYTES: u64 = 2 << 30;
/// How long any one phase may take before the run fails.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

fn main() {
    let relay_bin = benches::cargo_build("relay", "spool-relay", true);
    let fake_bin = benches::cargo_build("fake-gcs", "fake-gcs", true);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // reqwest is built without a bundled TLS provider (the relay is plain HTTP).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scratch = benches::scratch_root().join("relay-load");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();

    let fake = Process::start(
        &fake_bin,
        &[
            "--listen",
            "127.0.0.1:0",
            "--bucket",
            BUCKET,
            "--drop-bytes",
        ],
        "addr",
    );
    let relay = start_relay(&relay_bin, &scratch.join("spool"), &fake.addr);
    let peaks = Sampler::start(relay.child.id());
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let base = format!("http://{}", relay.addr);

    // In turn, not at once: each row's time is its own.
    let rows = vec![
        runtime.block_on(timed("many", many(&http, &base))),
        runtime.block_on(timed("slow", slow(&http, &base))),
        runtime.block_on(timed("oversized", oversized(&http, &base))),
        runtime.block_on(timed("lying", lying(&relay.addr))),
        runtime.block_on(timed("big", big(&http, &base))),
    ];
    let metrics = format!("http://{}/metrics", relay.metrics);
    runtime.block_on(drained(&http, &metrics));
    let (rss_peak, fds_peak) = peaks.stop();
    print_table(&rows, rss_peak, fds_peak);
    let gib: u64 = std::env::var("RELAY_LOAD_DRAIN_GIB").map_or(4, |v| v.parse().unwrap());
    if gib > 0 {
        runtime.block_on(large_drain(&http, &relay_bin, &fake, &scratch, gib));
    }
    let gib: u64 = std::env::var("RELAY_LOAD_DOWNLOAD_GIB").map_or(4, |v| v.parse().unwrap());
    if gib > 0 {
        runtime.block_on(large_download(&http, &relay_bin, &fake_bin, &scratch, gib));
    }
    if std::env::var("RELAY_LOAD_LISTS").map_or(true, |v| v != "0") {
        runtime.block_on(merged_lists(&http, &relay_bin, &fake_bin, &scratch));
    }
    if let Ok(baseline) = std::env::var("RELAY_LOAD_BASELINE") {
        compare(
            &runtime,
            &relay_bin,
            Path::new(&baseline),
            &fake.addr,
            &scratch,
        );
    }
    drop(relay);
    drop(fake);
}

/// `lists`: 128 concurrent list pages of about 8 MB (1,000 objects carrying 7 KiB
/// of custom metadata each) through a relay that holds a spooled object, so that
/// every page is read whole and merged with the spool: the relay's peak RSS
/// against what merging at once could hold (the review, issue 52 finding 16:
/// 1,163 MiB, every page read, parsed and cloned at once).
async fn merged_lists(http: &reqwest::Client, relay_bin: &Path, fake_bin: &Path, scratch: &Path) {
    const OBJECTS: usize = 1000;
    const LISTS: usize = 128;
    let keeping = ["--listen", "127.0.0.1:0", "--bucket", BUCKET];
    let fake = Process::start(fake_bin, &keeping, "addr");
    let fake_base = format!("http://{}", fake.addr);
    let metadata: serde_json::Map<String, serde_json::Value> = (0..7)
        .map(|k| (format!("k{k}"), serde_json::Value::String("v".repeat(1000))))
        .collect();
    let uploads = futures::stream::iter(0..OBJECTS).map(|n| {
        let resource = serde_json::json!({"name": format!("l/{n:05}"), "metadata": metadata});
        let body = format!(
            "--b\r\ncontent-type: application/json\r\n\r\n{resource}\r\n--b\r\n\
             content-type: text/plain\r\n\r\nx\r\n--b--\r\n"
        );
        let url = format!("{fake_base}/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart");
        let sent = (http.post(url))
            .header("content-type", "multipart/related; boundary=b")
            .body(body)
            .send();
        async move { assert_eq!(sent.await.unwrap().status(), 200) }
    });
    uploads.buffer_unordered(32).collect::<Vec<()>>().await;
    let relay = start_relay_with(relay_bin, &scratch.join("lists"), &fake.addr, &[]);
    let base = format!("http://{}", relay.addr);
    // Writes fail from now on: one upload is spooled and stays, so lists merge.
    let fail = "[[fault]]\nops = \"writes\"\nmix = { \"503\" = 1.0 }\n";
    let added = http
        .post(format!("{fake_base}/_fake/faults"))
        .body(fail)
        .send()
        .await;
    assert_eq!(added.unwrap().status(), 200);
    let spooled = http
        .post(media_url(&base, "l%2Fspooled"))
        .body("s")
        .send()
        .await
        .unwrap();
    assert_eq!(spooled.headers()["x-spool-outcome"], "spooled");
    let url = format!("{base}/storage/v1/b/{BUCKET}/o?prefix=l%2F&maxResults=1000");
    let page = http.get(&url).send().await.unwrap().bytes().await.unwrap();
    let sampler = Sampler::start(relay.child.id());
    let started = Instant::now();
    let lists = (0..LISTS).map(|_| {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            let answer = http.get(url).send().await.unwrap();
            (
                answer.status().as_u16(),
                answer.bytes().await.unwrap().len(),
            )
        })
    });
    let answers: Vec<(u16, usize)> = futures::future::join_all(lists)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let took = started.elapsed();
    let rss = sampler.stop_rss_max();
    let ok = answers.iter().filter(|(status, _)| *status == 200).count();
    let busy = answers.iter().filter(|(status, _)| *status == 503).count();
    println!(
        "\n'lists': {LISTS} list pages of {:.1} MB merged with the spool at once: {ok} \
         answered 200, {busy} 503 (--max-reads), in {:.1} s; relay peak RSS {:.0} MiB",
        page.len() as f64 / 1e6,
        took.as_secs_f64(),
        rss as f64 / 1024.0
    );
    drop(relay);
    drop(fake);
}

/// A phase's answers: status (0 when the connection ended without one) and count.
struct Row {
    phase: &'static str,
    answers: std::collections::BTreeMap<u16, u64>,
    seconds: f64,
    bytes: u64,
}

async fn timed(phase: &'static str, work: impl Future<Output = (Vec<u16>, u64)>) -> Row {
    let started = Instant::now();
    let (statuses, bytes) = tokio::time::timeout(PHASE_LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("phase {phase} did not finish in {PHASE_LIMIT:?}"));
    let mut answers = std::collections::BTreeMap::new();
    for status in statuses {
        *answers.entry(status).or_insert(0) += 1;
    }
    Row {
        phase,
        answers,
        seconds: started.elapsed().as_secs_f64(),
        bytes,
    }
}

fn media_url(base: &str, name: &str) -> String {
    format!(
        "{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name={name}"
    )
}

fn status(result: reqwest::Result<reqwest::Response>) -> u16 {
    result.map_or(0, |r| r.status().as_u16())
}

async fn many(http: &reqwest::Client, base: &str) -> (Vec<u16>, u64) {
    many_named(http, base, "many").await
}

async fn many_named(http: &reqwest::Client, base: &str, prefix: &str) -> (Vec<u16>, u64) {
    let body = Bytes::from(vec![0x5a; 256 << 10]);
    let tasks = (0..256).map(|client| {
        let (http, body, base, prefix) = (
            http.clone(),
            body.clone(),
            base.to_string(),
            prefix.to_string(),
        );
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for i in 0..8 {
                let url = media_url(&base, &format!("{prefix}/{client}/{i}"));
                statuses.push(status(http.post(url).body(body.clone()).send().await));
            }
            statuses
        })
    });
    let statuses: Vec<u16> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .flat_map(Result::unwrap)
        .collect();
    let bytes = statuses.len() as u64 * body.len() as u64;
    (statuses, bytes)
}

async fn slow(http: &reqwest::Client, base: &str) -> (Vec<u16>, u64) {
    let tasks = (0..64).map(|client| {
        let url = media_url(base, &format!("slow/{client}"));
        let pieces = futures::stream::unfold(0u32, |sent| async move {
            if sent == 16 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            Some((
                Ok::<_, std::io::Error>(Bytes::from(vec![1u8; 4096])),
                sent + 1,
            ))
        });
        let request = http
            .post(url)
            .header("content-length", 65_536)
            .body(reqwest::Body::wrap_stream(pieces));
        tokio::spawn(async move { status(request.send().await) })
    });
    let statuses: Vec<u16> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    (statuses, 64 * 65_536)
}

async fn oversized(http: &reqwest::Client, base: &str) -> (Vec<u16>, u64) {
    let mut tasks = Vec::new();
    for client in 0..16 {
        let url = media_url(base, &format!("gone/{client}"));
        let pieces = futures::stream::iter(
            (0..8).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![2u8; 1 << 20]))),
        )
        .chain(futures::stream::once(async {
            Err(std::io::Error::other("the client went away"))
        }));
        let request = http
            .post(url)
            .header("content-length", 3u64 << 30)
            .body(reqwest::Body::wrap_stream(pieces));
        tasks.push(tokio::spawn(async move { status(request.send().await) }));
        let url = format!("{base}/{BUCKET}/too-large/{client}");
        let request = http
            .put(url)
            .header("content-length", MAX_OBJECT_BYTES + 1)
            .body(reqwest::Body::wrap_stream(futures::stream::iter(
                (0..2).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![3u8; 1 << 20]))),
            )));
        tasks.push(tokio::spawn(async move { status(request.send().await) }));
    }
    let statuses = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    (statuses, (16 * 10) << 20)
}

/// Raw TCP: a body half as long as its `Content-Length`, then the writing half
/// closed; what comes back (a status, or nothing).
async fn lying(addr: &str) -> (Vec<u16>, u64) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tasks = (0..16).map(|client| {
        let addr = addr.to_string();
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let head = format!(
                "POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=lying/{client} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 100000\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(&[4u8; 50_000]).await.unwrap();
            stream.shutdown().await.unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            let text = String::from_utf8_lossy(&answer);
            text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
        })
    });
    let statuses = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    (statuses, 16 * 50_000)
}

async fn big(http: &reqwest::Client, base: &str) -> (Vec<u16>, u64) {
    const GIB: u64 = 1 << 30;
    let tasks = (0..2).map(|client| {
        let url = media_url(base, &format!("big/{client}"));
        let pieces =
            futures::stream::iter((0..GIB / (4 << 20)).map(move |i| {
                Ok::<_, std::io::Error>(Bytes::from(vec![(i as u8) ^ client; 4 << 20]))
            }));
        let request = http
            .post(url)
            .header("content-length", GIB)
            .body(reqwest::Body::wrap_stream(pieces));
        tokio::spawn(async move { status(request.send().await) })
    });
    let statuses = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    (statuses, 2 * GIB)
}

/// A 4 GiB object's bytes: `i`'s 4 MiB pieces, generated as they are sent.
fn large_piece(object: u8, i: u64) -> Bytes {
    Bytes::from(vec![(i as u8) ^ object.wrapping_mul(37); 4 << 20])
}

/// The `drain` phase (see the module doc).
async fn large_drain(
    http: &reqwest::Client,
    relay_bin: &Path,
    fake: &Process,
    scratch: &Path,
    gib: u64,
) {
    const OBJECTS: u8 = 4;
    let pieces = gib * 256;
    let dir = scratch.join("drain-spool");
    let relay = start_relay_with(relay_bin, &dir, &fake.addr, &["--max-bytes", "20GiB"]);
    let base = format!("http://{}", relay.addr);
    let faults = format!("http://{}/_fake/faults", fake.addr);
    let outage = "[[fault]]\nops = \"writes\"\nmix = { \"503\" = 1.0 }\n";
    let added = http.post(&faults).body(outage).send().await.unwrap();
    assert!(added.status().is_success(), "{:?}", added.text().await);
    let started = Instant::now();
    let uploads = (0..OBJECTS).map(|object| {
        let url = media_url(&base, &format!("drain/{object}"));
        let body = futures::stream::iter(
            (0..pieces).map(move |i| Ok::<_, std::io::Error>(large_piece(object, i))),
        );
        let request = http
            .post(url)
            .header("content-length", gib << 30)
            .body(reqwest::Body::wrap_stream(body));
        tokio::spawn(async move {
            let answer = request.send().await.unwrap();
            let outcome = answer.headers().get("x-spool-outcome").cloned();
            (answer.status().as_u16(), outcome)
        })
    });
    for answer in futures::future::join_all(uploads).await {
        let (status, outcome) = answer.unwrap();
        assert_eq!(
            (status, outcome.as_ref().map(|o| o.to_str().unwrap())),
            (200, Some("spooled"))
        );
    }
    let uploaded = started.elapsed();
    let sampler = Sampler::start(relay.child.id());
    let started = Instant::now();
    http.delete(&faults).send().await.unwrap();
    let metrics = format!("http://{}/metrics", relay.metrics);
    drained(http, &metrics).await;
    let drain = started.elapsed();
    let rss_during_drain = sampler.stop_rss_max();
    for object in 0..OBJECTS {
        let crc = (0..pieces).fold(0, |crc, i| {
            crc32c::crc32c_append(crc, &large_piece(object, i))
        });
        let url = format!(
            "http://{}/storage/v1/b/{BUCKET}/o/drain%2F{object}",
            fake.addr
        );
        let text = http.get(url).send().await.unwrap().text().await.unwrap();
        let resource: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(resource["size"], (gib << 30).to_string(), "{resource}");
        let crc = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            crc.to_be_bytes(),
        );
        assert_eq!(resource["crc32c"], crc, "drain/{object}: {resource}");
    }
    println!(
        "\n'drain': {OBJECTS} objects of {gib} GiB spooled in {:.0} s, drained by 4 workers in {:.0} s \
         ({:.0} MB/s); relay peak RSS while draining {:.0} MiB (budget 256 MiB); every object \
         in the fake with its size and crc32c",
        uploaded.as_secs_f64(),
        drain.as_secs_f64(),
        (u64::from(OBJECTS) * (gib << 30)) as f64 / drain.as_secs_f64() / 1e6,
        rss_during_drain as f64 / 1024.0,
    );
}

/// The `download` phase (see the module doc).
async fn large_download(
    http: &reqwest::Client,
    relay_bin: &Path,
    fake_bin: &Path,
    scratch: &Path,
    gib: u64,
) {
    const OBJECT: u8 = 9;
    let pieces = gib * 256;
    let keeping = ["--listen", "127.0.0.1:0", "--bucket", BUCKET];
    let fake = Process::start(fake_bin, &keeping, "addr");
    // Written through a relay: its streamed write is the way into the fake (in
    // parts, as the fake takes no single request this large).
    let writer = start_relay_with(
        relay_bin,
        &scratch.join("download-writer"),
        &fake.addr,
        &["--max-bytes", "20GiB"],
    );
    let body =
        futures::stream::iter((0..pieces).map(|i| Ok::<_, std::io::Error>(large_piece(OBJECT, i))));
    let base = format!("http://{}", writer.addr);
    let answer = (http.post(media_url(&base, "download/large")))
        .header("content-length", gib << 30)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .unwrap();
    let outcome = answer.headers().get("x-spool-outcome").cloned();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    // Stored, or spooled and then delivered: in the fake either way.
    drained(http, &format!("http://{}/metrics", writer.metrics)).await;
    println!("\n'download': the {gib} GiB object written through a relay: {outcome:?}");
    drop(writer);
    let small = (http.post(format!(
        "http://{}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=download%2Fsmall",
        fake.addr
    )))
    .body(vec![7u8; 1 << 20]);
    assert_eq!(small.send().await.unwrap().status(), 200);

    let reader = start_relay_with(relay_bin, &scratch.join("download-reader"), &fake.addr, &[]);
    let base = format!("http://{}", reader.addr);
    let sampler = Sampler::start(reader.child.id());
    let (small_bytes, _) = download(http, &base, "download%2Fsmall").await;
    assert_eq!(small_bytes, 1 << 20);
    let rss_small = sampler.stop_rss_max();
    let sampler = Sampler::start(reader.child.id());
    let started = Instant::now();
    let (bytes, crc) = download(http, &base, "download%2Flarge").await;
    let took = started.elapsed();
    let rss_large = sampler.stop_rss_max();
    assert_eq!(bytes, gib << 30, "the whole object came through");
    let sent = (0..pieces).fold(0, |crc, i| {
        crc32c::crc32c_append(crc, &large_piece(OBJECT, i))
    });
    assert_eq!(crc, sent, "the bytes that came through are the bytes sent");
    println!(
        "\n'download': {gib} GiB through the relay in {:.0} s ({:.0} MB/s); relay peak RSS \
         {:.0} MiB during it, {:.0} MiB during a 1 MiB download; crc32c as sent",
        took.as_secs_f64(),
        bytes as f64 / took.as_secs_f64() / 1e6,
        rss_large as f64 / 1024.0,
        rss_small as f64 / 1024.0,
    );
}

/// `GET ...?alt=media` of the object `encoded` through the relay at `base`, read
/// as it arrives: its length and crc32c.
async fn download(http: &reqwest::Client, base: &str, encoded: &str) -> (u64, u32) {
    let url = format!("{base}/storage/v1/b/{BUCKET}/o/{encoded}?alt=media");
    let answer = http.get(&url).send().await.unwrap();
    assert_eq!(answer.status(), 200, "GET {url}");
    let mut stream = answer.bytes_stream();
    let (mut bytes, mut crc) = (0u64, 0u32);
    while let Some(piece) = stream.next().await {
        let piece = piece.unwrap();
        bytes += piece.len() as u64;
        crc = crc32c::crc32c_append(crc, &piece);
    }
    (bytes, crc)
}

/// Waits until the relay's spool is empty; fails if it breaks or never drains.
async fn drained(http: &reqwest::Client, metrics: &str) {
    let started = Instant::now();
    loop {
        let text = http
            .get(metrics)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let value = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        };
        assert_eq!(
            value("spool_broken"),
            Some(0.0),
            "the spool broke under load"
        );
        if value("spool_files") == Some(0.0) {
            return;
        }
        assert!(started.elapsed() < PHASE_LIMIT, "the spool did not drain");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn print_table(rows: &[Row], rss_peak: u64, fds_peak: u64) {
    println!(
        "\nspool-relay under load on loopback (answers by status; 0 = connection ended without one)"
    );
    for row in rows {
        let answers: Vec<String> = row
            .answers
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        println!(
            "  {:<10} {:>7.1} s  {:>8.1} MB/s  {}",
            row.phase,
            row.seconds,
            row.bytes as f64 / row.seconds / 1e6,
            answers.join(", ")
        );
    }
    println!(
        "  peak RSS (VmHWM) {:.0} MiB, peak open descriptors {fds_peak}",
        rss_peak as f64 / 1024.0
    );
}

/// The `many` phase against this build and a baseline binary in turn.
fn compare(
    runtime: &tokio::runtime::Runtime,
    relay_bin: &Path,
    baseline: &Path,
    fake: &str,
    scratch: &Path,
) {
    let mut seconds = [Vec::new(), Vec::new()];
    for pair in 0..3 {
        for (i, bin) in [relay_bin, baseline].into_iter().enumerate() {
            let dir = scratch.join(format!("compare-{pair}-{i}"));
            let relay = start_relay(bin, &dir, fake);
            let http = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap();
            let base = format!("http://{}", relay.addr);
            let prefix = format!("compare/{pair}/{i}");
            let row = runtime.block_on(timed("many", many_named(&http, &base, &prefix)));
            assert_eq!(
                row.answers.get(&200),
                Some(&2048),
                "{bin:?}: {:?}",
                row.answers
            );
            seconds[i].push(row.seconds);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ours, theirs) = (median(&mut seconds[0]), median(&mut seconds[1]));
    println!(
        "\n'many' against {}: this build {ours:.2} s, baseline {theirs:.2} s (medians of 3), throughput ratio {:.2}",
        baseline.display(),
        theirs / ours
    );
}

fn start_relay(bin: &Path, dir: &Path, fake: &str) -> Process {
    let flags = [
        "--max-bytes",
        "8GiB",
        "--max-files",
        "1000000",
        "--max-object-bytes",
        "2GiB",
        "--workers",
        "2",
    ];
    start_relay_with(bin, dir, fake, &flags)
}

/// spool-relay on `dir` in front of the fake at `fake`, on free loopback ports,
/// with `flags` beside the defaults.
fn start_relay_with(bin: &Path, dir: &Path, fake: &str, flags: &[&str]) -> Process {
    let endpoint = format!("http://{fake}");
    let upstream = format!("gs://{BUCKET}");
    let mut args = vec![
        "--dir",
        dir.to_str().unwrap(),
        "--upstream",
        &upstream,
        "--endpoint",
        &endpoint,
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(flags);
    Process::start(bin, &args, "addr")
}

/// A child process and the addresses its "listening" log line gave.
struct Process {
    child: Child,
    addr: String,
    metrics: String,
}

impl Process {
    /// Starts `bin`, waits for its first log line saying "listening", reads `field=`.
    fn start(bin: &Path, args: &[&str], field: &str) -> Process {
        let mut child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines
            .find(|l| l.as_ref().is_ok_and(|l| l.contains("listening")))
            .unwrap_or_else(|| panic!("{} never said it was listening", bin.display()))
            .unwrap();
        let value = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .map(|v| v.trim_matches('"').to_string())
                .unwrap_or_default()
        };
        let (addr, metrics) = (value(field), value("metrics"));
        // Keep reading its output so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Process {
            child,
            addr,
            metrics,
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Peak RSS (KiB) and open descriptors of a process, sampled every 50 ms.
struct Sampler {
    stop: Arc<AtomicBool>,
    fds: Arc<AtomicU64>,
    /// The largest `VmRSS` sampled (KiB).
    rss: Arc<AtomicU64>,
    pid: u32,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let (stop, fds) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let rss = Arc::new(AtomicU64::new(0));
        let (stop_seen, fds_seen, rss_seen) = (stop.clone(), fds.clone(), rss.clone());
        let thread = std::thread::spawn(move || {
            while !stop_seen.load(Ordering::Relaxed) {
                let open = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
                fds_seen.fetch_max(open as u64, Ordering::Relaxed);
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let now = status_kib(&status, "VmRSS:");
                rss_seen.fetch_max(now, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Sampler {
            stop,
            fds,
            rss,
            pid,
            thread,
        }
    }

    /// Stops sampling: the largest RSS sampled since it started, in KiB (unlike
    /// `VmHWM`, not what came before).
    fn stop_rss_max(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.rss.load(Ordering::Relaxed)
    }

    /// Stops sampling: (peak RSS in KiB, from the kernel's `VmHWM`; peak descriptors).
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let hwm = status_kib(&status, "VmHWM:");
        let _ = std::io::stdout().flush();
        (hwm, self.fds.load(Ordering::Relaxed))
    }
}

/// A `/proc/PID/status` field in KiB (0 when absent).
fn status_kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
