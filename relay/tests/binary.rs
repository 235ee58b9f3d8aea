//! The `spool-relay` binary as users run it. Stopped with SIGTERM while an upload is
//! in flight, it stops accepting at once, lets the upload finish and answers it
//! (within `--shutdown-grace`), and exits 0: the upstream is the fake, in-process,
//! behind a proxy that holds every answer at a gate, so the test decides when the
//! upload completes; nothing waits on a clock. Given a relative `--dir` that does
//! not exist yet, it creates it.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use common::{BUCKET, PATIENCE, encode, line_with, log_lines, outcome, real_fake, stored};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};

/// A TCP proxy to `upstream` that passes requests on at once and holds every answer
/// until the gate opens: the permits count connections whose first bytes arrived.
async fn gated_proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Semaphore>, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let arrived = Arc::new(Semaphore::new(0));
    let (gate, opened) = watch::channel(false);
    let arrivals = arrived.clone();
    tokio::spawn(async move {
        loop {
            let (client, _) = listener.accept().await.unwrap();
            let server = TcpStream::connect(upstream).await.unwrap();
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            let arrivals = arrivals.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut first = vec![0u8; 1 << 16];
                let n = from_client.read(&mut first).await.unwrap_or(0);
                if n > 0 {
                    arrivals.add_permits(1);
                }
                to_server.write_all(&first[..n]).await.unwrap();
                let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
            });
            let mut opened = opened.clone();
            tokio::spawn(async move {
                let _ = opened.wait_for(|open| *open).await;
                let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
            });
        }
    });
    (addr, arrived, gate)
}

/// The relay process, killed if the test ends before it exits (so that a failed
/// test does not leave it running, nor the log reader waiting on it).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `spool-relay` in `cwd` with `args` (and a loopback port of its choosing);
/// the running process, its log, and the address it listens on.
async fn start(
    cwd: &std::path::Path,
    args: &[&str],
) -> (Running, mpsc::UnboundedReceiver<String>, String) {
    let (relay, log, listening) = start_listening(cwd, args).await;
    let addr = field(&listening, "addr").expect("the listening line names its address");
    (relay, log, addr)
}

/// The value of `name=` in a log line.
fn field(line: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    (line.split_whitespace())
        .find_map(|word| word.strip_prefix(prefix.as_str()))
        .map(str::to_string)
}

/// [`start`], with the whole `spool-relay listening` line.
async fn start_listening(
    cwd: &std::path::Path,
    args: &[&str],
) -> (Running, mpsc::UnboundedReceiver<String>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_spool-relay"))
        .current_dir(cwd)
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("STORAGE_EMULATOR_HOST")
        .env_remove(relay::auth::TOKEN_ENV)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut relay = Running(child);
    let mut log = log_lines(&mut relay.0);
    let listening = line_with(&mut log, "spool-relay listening").await;
    (relay, log, listening)
}

/// Sends SIGTERM to `relay`.
fn terminate(relay: &Running) {
    let term = Command::new("kill")
        .args(["-TERM", &relay.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
}

/// Waits until `relay` has exited (its log closes), then its exit status.
async fn exited(
    mut relay: Running,
    log: &mut mpsc::UnboundedReceiver<String>,
) -> std::process::ExitStatus {
    let rest = async { while log.recv().await.is_some() {} };
    tokio::time::timeout(PATIENCE, rest)
        .await
        .expect("spool-relay exits");
    relay.0.wait().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_dir_that_does_not_exist_yet_is_created() {
    // What broke: the spool created each missing ancestor of "new/spool/entries"
    // down from the empty path, which fails (ENOENT), so the relay did not start.
    let cwd = tempfile::tempdir().unwrap();
    let (relay, mut log, _) = start(
        cwd.path(),
        &[
            "--dir",
            "new/spool",
            "--upstream",
            "memory://",
            "--bucket",
            BUCKET,
        ],
    )
    .await;
    assert!(cwd.path().join("new/spool/entries").is_dir());
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_upload_in_flight_finish_within_the_grace_and_exits_0() {
    let (fake, fake_base) = real_fake().await;
    let fake_addr: SocketAddr = fake_base.trim_start_matches("http://").parse().unwrap();
    let (proxy, arrived, gate) = gated_proxy(fake_addr).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("gs://{BUCKET}");
    let endpoint = format!("http://{proxy}");
    let (mut relay, mut log, addr) = start(
        dir.path(),
        &[
            "--dir",
            "spool",
            "--upstream",
            &upstream,
            "--endpoint",
            &endpoint,
            "--shutdown-grace",
            "5m",
        ],
    )
    .await;

    let url = format!(
        "http://{addr}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name={}",
        encode("in flight")
    );
    let upload = tokio::spawn(reqwest::Client::new().post(url).body("in flight").send());
    tokio::time::timeout(PATIENCE, arrived.acquire())
        .await
        .expect("the upload reaches the upstream")
        .unwrap()
        .forget();

    terminate(&relay);
    line_with(&mut log, "stopped accepting; finishing requests in flight").await;
    assert!(
        TcpStream::connect(&addr).await.is_err(),
        "a connection was accepted after SIGTERM"
    );
    assert!(
        relay.0.try_wait().unwrap().is_none(),
        "spool-relay exited with an upload in flight"
    );

    gate.send(true).unwrap();
    let response = tokio::time::timeout(PATIENCE, upload)
        .await
        .expect("the upload in flight is answered")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(outcome(&response), "stored");
    assert_eq!(
        stored(&fake, "in flight").as_deref(),
        Some(&b"in flight"[..])
    );

    line_with(&mut log, "spool-relay stopped").await;
    let status = exited(relay, &mut log).await;
    assert!(status.success(), "spool-relay exited with {status}");
}

/// What broke (the torture run, 2026-12): the SIGTERM handler was installed only when
/// the server first polled its shutdown future, after the `listening` line, so a
/// SIGTERM right after that line killed the process (by the signal, not exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_right_after_the_listening_line_is_a_graceful_stop() {
    let (_fake, fake_base) = real_fake().await;
    for attempt in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let upstream = format!("gs://{BUCKET}");
        let args = [
            "--dir",
            spool.to_str().unwrap(),
            "--upstream",
            &upstream,
            "--endpoint",
            &fake_base,
        ];
        let (relay, mut log, _) = start(dir.path(), &args).await;
        terminate(&relay);
        let status = exited(relay, &mut log).await;
        assert!(status.success(), "attempt {attempt}: {status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_passes_reads_and_lists_through_to_its_upstream_and_logs_them() {
    let (fake, fake_base) = real_fake().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("gs://{BUCKET}");
    let args = [
        "--dir",
        "spool",
        "--upstream",
        &upstream,
        "--endpoint",
        &fake_base,
    ];
    let (relay, mut log, addr) = start(dir.path(), &args).await;
    let http = reqwest::Client::new();
    upload_stored(&http, &format!("http://{addr}"), &fake, "d/a", "through").await;

    let media = format!("http://{addr}/storage/v1/b/{BUCKET}/o/d%2Fa?alt=media");
    let media = http.get(media).send().await.unwrap();
    assert_eq!(media.status(), 200);
    assert_eq!(media.text().await.unwrap(), "through");
    let line = line_with(&mut log, "route=\"pass_through\"").await;
    assert!(line.contains("status=200"), "{line}");
    assert!(line.contains("sent_bytes=7"), "{line}");
    assert!(line.contains("method=GET"), "{line}");

    let list = format!("http://{addr}/storage/v1/b/{BUCKET}/o?prefix=d/&delimiter=/");
    let list = common::body_json(http.get(list).send().await.unwrap()).await;
    assert_eq!(list["items"][0]["name"], "d/a");
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_names_its_request_id_and_the_log_has_the_upstream_detail_under_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("gs://{BUCKET}");
    // Port 9 (discard) has no server here: the upstream cannot be reached.
    let args = [
        "--dir",
        "spool",
        "--upstream",
        &upstream,
        "--endpoint",
        "http://127.0.0.1:9",
    ];
    let (relay, mut log, addr) = start(dir.path(), &args).await;
    let http = reqwest::Client::new();
    let media = format!("http://{addr}/storage/v1/b/{BUCKET}/o/a?alt=media");
    let answer = http.get(media).send().await.unwrap();
    assert_eq!(answer.status(), 503);
    let id = answer.headers()[relay::REQUEST_ID_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let text = answer.text().await.unwrap();
    assert!(!text.contains("127.0.0.1:9"), "{text}");
    assert!(text.contains("x-spool-request-id"), "{text}");
    // The operator finds the client's report in the log by its id, with the detail.
    let line = line_with(&mut log, "the upstream cannot be reached").await;
    assert!(line.contains(&format!("request{{id={id}}}")), "{line}");
    assert!(line.contains("127.0.0.1:9"), "{line}");
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_answers_reads_from_a_file_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    let upstream = format!("file://{}", objects.display());
    let args = [
        "--dir",
        "spool",
        "--upstream",
        &upstream,
        "--bucket",
        BUCKET,
    ];
    let (relay, mut log, addr) = start(dir.path(), &args).await;
    let http = reqwest::Client::new();
    let url = format!(
        "http://{addr}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name=f"
    );
    assert_eq!(
        http.post(url).body("local").send().await.unwrap().status(),
        200
    );
    let resource = format!("http://{addr}/storage/v1/b/{BUCKET}/o/f");
    let resource = common::body_json(http.get(resource).send().await.unwrap()).await;
    assert_eq!(
        (&resource["name"], &resource["size"]),
        (&"f".into(), &"5".into())
    );
    let xml = http
        .get(format!("http://{addr}/{BUCKET}/f"))
        .send()
        .await
        .unwrap();
    assert_eq!(xml.text().await.unwrap(), "local");
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_certificate_the_binary_serves_https_and_its_session_urls_say_so() {
    let (fake, fake_base) = real_fake().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    let upstream = format!("gs://{BUCKET}");
    let args = [
        "--dir",
        "spool",
        "--upstream",
        &upstream,
        "--endpoint",
        &fake_base,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    let (relay, mut log, addr) = start(dir.path(), &args).await;
    let port = addr.rsplit(':').next().unwrap();
    let root = reqwest::Certificate::from_pem(generated.cert.pem().as_bytes()).unwrap();
    let https = reqwest::Client::builder()
        .add_root_certificate(root)
        .build()
        .unwrap();
    let base = format!("https://localhost:{port}");
    upload_stored(&https, &base, &fake, "s/a", "secure").await;
    // A resumable session's URL is where the client reached the relay: https.
    let start = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=s/b");
    let opened = https.post(start).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let location = opened.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with(&format!("{base}/")), "{location}");
    // Plain HTTP to the same port gets no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://{addr}/storage/v1/b/{BUCKET}"))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}

/// A media upload of `data` as `name` through the relay at `base`, answered 200 and
/// stored in the fake as sent.
async fn upload_stored(
    http: &reqwest::Client,
    base: &str,
    fake: &fake_gcs::FakeGcs,
    name: &str,
    data: &'static str,
) {
    let url = format!(
        "{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name={name}"
    );
    let upload = http.post(url).body(data).send().await.unwrap();
    assert_eq!(upload.status(), 200);
    assert_eq!(stored(fake, name).as_deref(), Some(data.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inherited_socket_on_every_address_needs_a_token_whatever_listen_says() {
    // Found by review (52/4): the token rule read --listen (loopback by default),
    // so a socket systemd bound to 0.0.0.0 (ListenStream=4443) and passed in
    // LISTEN_FDS served uploads from the LAN with no token.
    use command_fds::{CommandFdExt, FdMapping};
    use std::os::fd::OwnedFd;
    let dir = tempfile::tempdir().unwrap();
    let socket = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_spool-relay"));
    command
        .arg("--dir")
        .arg(dir.path())
        .args(["--upstream", "memory://", "--bucket", BUCKET])
        .env("LISTEN_FDS", "1")
        .env_remove("LISTEN_PID")
        .env_remove(relay::auth::TOKEN_ENV)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mapping = FdMapping {
        parent_fd: OwnedFd::from(socket),
        child_fd: 3,
    };
    command.fd_mappings(vec![mapping]).unwrap();
    let mut relay = Running(command.spawn().unwrap());
    let refused = async {
        while relay.0.try_wait().unwrap().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let served = tokio::time::timeout(PATIENCE, refused).await.is_err();
    assert!(!served, "spool-relay serves the socket without a token");
    let output = output_of(&mut relay.0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the socket passed in LISTEN_FDS (bound to 0.0.0.0:")
            && stderr.contains("no token is configured"),
        "{stderr}"
    );
}

/// The status of `child`, which has exited, and what it wrote.
fn output_of(child: &mut Child) -> std::process::Output {
    use std::io::Read as _;
    let status = child.wait().unwrap();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(mut out) = child.stdout.take() {
        out.read_to_end(&mut stdout).unwrap();
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_end(&mut stderr).unwrap();
    }
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// `GET {metrics}{path}`: the status and body.
async fn probe(metrics: &str, path: &str) -> (u16, String) {
    let answer = reqwest::get(format!("http://{metrics}{path}"))
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_is_the_relay_serving_and_uploadz_says_why_uploads_are_refused() {
    // Found by review (52/10): /readyz said `ready` while uploads were refused,
    // and a readiness that follows the spool would take a sidecar's whole Pod out
    // of its Services: the state is /uploadz's, with its reason.
    let (_fake, fake_base) = real_fake().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--dir",
        "spool",
        "--upstream",
        "gs://nosuch",
        "--endpoint",
        &fake_base,
        "--metrics",
        "127.0.0.1:0",
    ];
    let (relay, mut log, listening) = start_listening(dir.path(), &args).await;
    let metrics = field(&listening, "metrics").unwrap();
    line_with(&mut log, "the upstream has no bucket nosuch").await;
    assert_eq!(probe(&metrics, "/readyz").await, (200, "ready\n".into()));
    let (status, refusing) = probe(&metrics, "/uploadz").await;
    assert_eq!(status, 503, "{refusing}");
    assert!(
        refusing.contains("the upstream has no bucket nosuch"),
        "{refusing}"
    );
    let (_, scraped) = probe(&metrics, "/metrics").await;
    assert!(
        scraped.contains("spool_relay_refusing_uploads{reason=\"bucket_missing\"} 1"),
        "{scraped}"
    );
    // The relay's scrape as `curl` gets it, which promtool reads (issue 57: it was
    // OpenMetrics whatever was asked, and `promtool check metrics` failed).
    if let Some(promtool) = spool::testing::tools::tool("promtool")
        && let Err(said) = spool::testing::tools::check_metrics(&promtool, &scraped)
    {
        panic!("promtool check metrics: {said}\n{scraped}");
    }
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_a_line_and_an_uploads_line_says_where_it_went() {
    // Issue 57: a request line had no outcome, and no log pipeline could read the
    // lines without a parser of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    let upstream = format!("file://{}", objects.display());
    let args = [
        "--dir",
        "spool",
        "--upstream",
        &upstream,
        "--bucket",
        BUCKET,
    ];
    let (relay, mut log, listening) =
        start_listening(dir.path(), &[&args[..], &["--log-format", "json"]].concat()).await;
    let json = |line: &str| -> serde_json::Value {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    let listening = json(&listening);
    assert_eq!(listening["level"], "INFO", "{listening}");
    assert_eq!(listening["fields"]["message"], "spool-relay listening");
    let addr = listening["fields"]["addr"].as_str().unwrap().to_owned();
    let http = reqwest::Client::new();
    let url = format!(
        "http://{addr}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name=f"
    );
    let answer = http.post(url).body("local").send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let id: u64 = answer.headers()[relay::REQUEST_ID_HEADER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let raw = line_with(&mut log, "\"message\":\"request\"").await;
    let line = json(&raw);
    let fields = &line["fields"];
    assert_eq!(
        (&fields["status"], &fields["outcome"], &fields["method"]),
        (&200.into(), &"stored".into(), &"POST".into()),
        "{line}"
    );
    assert_eq!(line["span"]["id"], id, "{line}");
    // Each key once: a log pipeline keeps one value of a key written twice.
    assert_eq!(raw.matches("\"message\":").count(), 1, "{raw}");
    terminate(&relay);
    assert!(exited(relay, &mut log).await.success());
}
