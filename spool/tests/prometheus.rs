//! A real Prometheus server (the `prometheus` binary of Debian's package) scrapes the
//! metrics endpoint of two running spools that share one registry, loads the shipped
//! alert rules, and the test reads the series and the rules' health back through its
//! HTTP API. The one test that waits on real time: it polls the external server,
//! bounded by [`PATIENCE`]. Skipped with a notice when `prometheus` is not on `PATH`,
//! unless `SPOOL_REQUIRE_PROMTOOL=1`.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use serde_json::Value;
use spool::{Spool, SpoolConfig};

/// How long the server may take to start, scrape and evaluate.
const PATIENCE: Duration = Duration::from_secs(30);

/// The server process, killed when the test ends however it ends.
struct Server {
    child: Child,
    log: std::path::PathBuf,
}

impl Server {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(bin: &Path, dir: &Path, scrape: SocketAddr, listen: SocketAddr) -> Server {
    let rules = common::crate_dir().join("alerts/spool.rules.yml");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {rules:?}\n\
         scrape_configs:\n  - job_name: spool\n    static_configs:\n      - targets: ['{scrape}']\n",
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let log = dir.join("prometheus.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={listen}"))
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    Server { child, log }
}

/// A loopback port nobody listens on now.
fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// `GET path` on the server: the JSON body, or why not (not up yet, an error status).
async fn get(server: SocketAddr, path: &str) -> Result<Value, String> {
    let stream = tokio::net::TcpStream::connect(server)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, server.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    serde_json::from_slice(&body).map_err(|e| e.to_string())
}

/// `s` percent-encoded for a URL's query string.
fn url_encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant vector `query` returns, as (labels, value) pairs.
async fn query(server: SocketAddr, query: &str) -> Result<Vec<(Value, f64)>, String> {
    let path = format!("/api/v1/query?query={}", url_encoded(query));
    let body = get(server, &path).await?;
    let result = body["data"]["result"]
        .as_array()
        .ok_or_else(|| format!("no result in {body}"))?;
    Ok(result
        .iter()
        .map(|s| {
            let value = s["value"][1].as_str().and_then(|v| v.parse().ok());
            (s["metric"].clone(), value.unwrap_or(f64::NAN))
        })
        .collect())
}

/// Polls `check` every 250 ms until it returns `Some`, for at most [`PATIENCE`].
async fn eventually<T, F, Fut>(server: &Server, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, String>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut last = String::from("no answer yet");
    loop {
        match check().await {
            Ok(Some(found)) => return found,
            Ok(None) => {}
            Err(e) => last = e,
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus did not show {what} within {PATIENCE:?} (last: {last}); its log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_two_spools_and_loads_the_rules() {
    let Some(bin) = common::tool("prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let uploads = Spool::open(dir.path().join("uploads"), SpoolConfig::default())
        .await
        .unwrap();
    let exports = Spool::open(dir.path().join("exports"), SpoolConfig::default())
        .await
        .unwrap();
    for name in ["a", "b", "c"] {
        uploads
            .put(name, Bytes::from_static(b"12345"))
            .await
            .unwrap();
    }
    exports.put("x", Bytes::from_static(b"1")).await.unwrap();
    let mut registry = Registry::default();
    uploads
        .register_metrics_with_labels(&mut registry, [("spool", "uploads")])
        .unwrap();
    exports
        .register_metrics_with_labels(&mut registry, [("spool", "exports")])
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = listener.local_addr().unwrap();
    let serving = tokio::spawn(spool::metrics::serve(listener, Arc::new(registry)));

    let api = free_port();
    let server = start(&bin, dir.path(), endpoint, api);

    let files = eventually(&server, "spool_files of both spools", || async {
        let found = query(api, "spool_files").await?;
        Ok((found.len() == 2).then_some(found))
    })
    .await;
    let by_spool = |spool: &str| {
        files
            .iter()
            .find(|(labels, _)| labels["spool"] == spool)
            .unwrap_or_else(|| panic!("no spool_files{{spool={spool:?}}} in {files:?}"))
    };
    assert_eq!(by_spool("uploads").1, 3.0);
    assert_eq!(by_spool("exports").1, 1.0);
    let (labels, _) = by_spool("uploads");
    assert_eq!(labels["job"], "spool");
    assert_eq!(labels["instance"], endpoint.to_string());

    let up = query(api, "up").await.unwrap();
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0].1, 1.0, "the scrape failed: {up:?}");
    let info = query(api, "spool_build_info").await.unwrap();
    assert_eq!(info.len(), 2, "{info:?}");
    assert!(
        info.iter()
            .all(|(l, v)| l["version"] == env!("CARGO_PKG_VERSION") && *v == 1.0),
        "{info:?}"
    );
    let rejected = query(api, r#"spool_uploads_total{outcome="rejected"}"#)
        .await
        .unwrap();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(rejected.iter().all(|(_, v)| *v == 0.0), "{rejected:?}");
    let oldest = query(api, "spool_oldest_entry_created_timestamp_seconds")
        .await
        .unwrap();
    assert_eq!(oldest.len(), 2, "{oldest:?}");

    // The shipped rules load, and every one evaluates without error.
    let rules = eventually(&server, "every rule evaluated", || async {
        let body = get(api, "/api/v1/rules").await?;
        let rules: Vec<Value> = body["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let evaluated = rules.iter().all(|r| r["health"] != "unknown");
        Ok((!rules.is_empty() && evaluated).then_some(rules))
    })
    .await;
    assert_eq!(rules.len(), spool::alerts::RULES.len());
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
    // absent(spool_files) may be pending from an evaluation before the first
    // scrape; once both spools are scraped, no alert is pending or firing.
    eventually(&server, "no alert for two healthy spools", || async {
        let alerts = query(api, "ALERTS").await?;
        if alerts.is_empty() {
            Ok(Some(()))
        } else {
            Err(format!("alerts: {alerts:?}"))
        }
    })
    .await;
    serving.abort();
}
