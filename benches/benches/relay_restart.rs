//! `spool-relay` starting on a spool an earlier run left full (issue 52, finding
//! 15): how long from its start to listening, to the first upload answered, and to
//! the first read of an object the earlier run spooled, beside how long the disk
//! takes to read the whole backlog (what the first read waited for before: each
//! entry read whole for its MD5). Two backlogs: 100,000 entries of 1 KiB, and
//! 20 GiB in entries of 16 MiB (`RELAY_RESTART_GIB`, 0 skips it).
//!
//! The release binaries on loopback: `fake-gcs` failing every write (so nothing
//! drains and the upload is spooled), `spool-relay` on a prepared spool directory
//! (`benches::prepared_spool`, kept across runs under the bench's scratch root).
//! Run as root, the page cache is dropped before each start (`/proc/sys/vm/
//! drop_caches`), so the relay reads a cold disk, as after a reboot; otherwise the
//! figures are for a warm cache and say so.
//!
//! Run: `cargo bench -p benches --bench relay_restart`.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BUCKET: &str = "bench";

/// Drops the page cache; whether it could (root).
fn drop_caches() -> bool {
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// How long reading every entry file of `dir` whole takes, and how many bytes.
fn read_backlog(dir: &Path) -> (Duration, u64) {
    let started = Instant::now();
    let mut bytes = 0;
    let mut buffer = vec![0u8; 1 << 20];
    for file in std::fs::read_dir(dir.join(spool::layout::ENTRIES_DIR)).unwrap() {
        let mut file = std::fs::File::open(file.unwrap().path()).unwrap();
        loop {
            let n = file.read(&mut buffer).unwrap();
            if n == 0 {
                break;
            }
            bytes += n as u64;
        }
    }
    (started.elapsed(), bytes)
}

/// One start of the relay on `dir` in front of the fake at `fake`: seconds to
/// listening, to the first upload answered, to the first read of `earlier`.
fn start_once(relay_bin: &Path, dir: &Path, fake: &str, earlier: &str) -> [Duration; 3] {
    let started = Instant::now();
    let mut child = Command::new(relay_bin)
        .arg("--dir")
        .arg(dir)
        .args(["--upstream", &format!("gs://{BUCKET}"), "--endpoint", fake])
        .args(["--listen", "127.0.0.1:0", "--max-files", "200000"])
        .args(["--max-bytes", "24GiB", "--max-object-bytes", "20MiB"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .find(|l| {
            l.as_ref()
                .is_ok_and(|l| l.contains("spool-relay listening"))
        })
        .expect("the relay listens")
        .unwrap();
    let listening = started.elapsed();
    std::thread::spawn(move || lines.for_each(drop));
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (uploaded, read) = runtime.block_on(async {
        let http = reqwest::Client::new();
        let upload = async {
            let url = format!(
                "http://{addr}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=after-restart"
            );
            let answer = http.post(url).body("new").send().await.unwrap();
            assert_eq!(answer.status(), 200);
            started.elapsed()
        };
        let read = async {
            let name = earlier.replace('/', "%2F");
            let url = format!("http://{addr}/storage/v1/b/{BUCKET}/o/{name}");
            let answer = http.get(url).send().await.unwrap();
            assert_eq!(answer.status(), 200, "the earlier run's {earlier}");
            assert_eq!(answer.headers()["x-spool-outcome"], "spooled");
            started.elapsed()
        };
        tokio::join!(upload, read)
    });
    stop(&mut child);
    [listening, uploaded, read]
}

/// Removes the entries a run added (the upload) past the prepared `n`, so the
/// prepared spool is reused by the next run.
fn forget_new_entries(dir: &Path, n: u64) {
    for file in std::fs::read_dir(dir.join(spool::layout::ENTRIES_DIR)).unwrap() {
        let path = file.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let seq: u64 = name
            .split('.')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if seq > n {
            std::fs::remove_file(&path).unwrap();
        }
    }
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let relay_bin = benches::cargo_build("relay", "spool-relay", true);
    let fake_bin = benches::cargo_build("fake-gcs", "fake-gcs", true);
    let faults = benches::scratch_root().join("relay-restart-faults.toml");
    std::fs::write(
        &faults,
        "[[fault]]\nops = \"writes\"\nmix = { \"503\" = 1.0 }\n",
    )
    .unwrap();
    let mut fake = Command::new(&fake_bin)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--bucket",
            BUCKET,
            "--drop-bytes",
        ])
        .arg("--faults")
        .arg(&faults)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(fake.stdout.take().unwrap()).lines();
    let line = lines
        .find(|l| l.as_ref().is_ok_and(|l| l.contains("listening")))
        .unwrap()
        .unwrap();
    std::thread::spawn(move || lines.for_each(drop));
    let fake_addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let fake_base = format!("http://{fake_addr}");
    let gib: u64 = std::env::var("RELAY_RESTART_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut backlogs = vec![("restart-small", 100_000u64, 1024usize)];
    if gib > 0 {
        backlogs.push(("restart-large", gib * 64, 16 << 20));
    }
    println!("\nspool-relay starting on a full spool (release binaries)");
    for (label, n, payload) in backlogs {
        let dir = benches::prepared_spool(label, n, payload);
        let cold = drop_caches();
        let (took, bytes) = read_backlog(&dir);
        let rate = bytes as f64 / took.as_secs_f64() / 1e6;
        let cold_start = drop_caches();
        let [listening, uploaded, read] =
            start_once(&relay_bin, &dir, &fake_base, "bench/00000001");
        forget_new_entries(&dir, n);
        println!(
            "  {n} entries of {payload} B ({:.1} GiB): reading the backlog whole {:.2} s ({rate:.0} MB/s, {}); \
             the relay: listening {:.3} s, first upload answered {:.3} s, first read of an earlier object {:.3} s ({})",
            bytes as f64 / (1u64 << 30) as f64,
            took.as_secs_f64(),
            if cold { "cold" } else { "warm cache" },
            listening.as_secs_f64(),
            uploaded.as_secs_f64(),
            read.as_secs_f64(),
            if cold_start { "cold" } else { "warm cache" },
        );
    }
    stop(&mut fake);
}
