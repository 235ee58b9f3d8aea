//! The `fake-gcs` binary as a user starts it: bytes kept by default, buckets on
//! demand, and every setting from `FAKE_GCS_*` environment variables.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use common::send;
use http::{Method, StatusCode};

/// A running `fake-gcs`, stopped when dropped.
struct Running {
    child: Child,
    base: String,
    /// The first log line (`fake Cloud Storage listening addr=...`).
    banner: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with `args` and `env` (and no other `FAKE_GCS_*`), and reads
/// the address it bound from its first log line.
fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fake-gcs"));
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, _) in std::env::vars() {
        if key.starts_with("FAKE_GCS_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied()).env("RUST_LOG", "info");
    let mut child = command.spawn().expect("fake-gcs starts");
    let stdout = child.stdout.take().unwrap();
    let banner = BufReader::new(stdout).lines().next();
    let Some(Ok(banner)) = banner else {
        let output = child.wait_with_output().unwrap();
        panic!(
            "fake-gcs printed nothing: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let addr = banner
        .split_whitespace()
        .find_map(|word| word.strip_prefix("addr="))
        .unwrap_or_else(|| panic!("no addr= in {banner:?}"));
    let base = format!("http://{addr}");
    Running {
        child,
        base,
        banner,
    }
}

#[tokio::test]
async fn started_with_only_listen_it_keeps_bytes_and_has_the_buckets_it_is_given() {
    let fake = start(&["--listen", "127.0.0.1:0"], &[]);
    assert!(fake.banner.contains("keep_bytes=true"), "{}", fake.banner);
    let base = &fake.base;
    // As in Cloud Storage, a bucket nobody created does not exist: an upload, a
    // read, a list and a delete of it are 404, and it is not made by them.
    let put = send(base, Method::PUT, "/any-bucket/a", &[], "hello").await;
    assert_eq!(put.status(), StatusCode::NOT_FOUND);
    for path in ["/storage/v1/b/any-bucket", "/storage/v1/b/any-bucket/o"] {
        let get = send(base, Method::GET, path, &[], "").await;
        assert_eq!(get.status(), StatusCode::NOT_FOUND, "GET {path}");
    }
    let delete = send(base, Method::DELETE, "/storage/v1/b/any-bucket", &[], "").await;
    assert_eq!(delete.status(), StatusCode::NOT_FOUND);
    // Created, it takes uploads.
    let body = r#"{"name":"any-bucket"}"#;
    let created = send(base, Method::POST, "/storage/v1/b?project=p", &[], body).await;
    assert_eq!(created.status(), StatusCode::OK);
    let put = send(base, Method::PUT, "/any-bucket/a", &[], "hello").await;
    assert_eq!(put.status(), StatusCode::OK);
    let get = send(base, Method::GET, "/any-bucket/a", &[], "").await;
    assert_eq!(get.status(), StatusCode::OK);
    assert_eq!(&get.body()[..], b"hello");
}

#[tokio::test]
async fn created_on_use_a_bucket_still_needs_a_name_cloud_storage_takes() {
    let fake = start(&["--listen", "127.0.0.1:0", "--create-buckets-on-use"], &[]);
    let base = &fake.base;
    let put = send(base, Method::PUT, "/any-bucket/a", &[], "hello").await;
    assert_eq!(put.status(), StatusCode::OK);
    // `vb` is too short for POST /storage/v1/b, so no upload makes it either.
    let short = send(base, Method::PUT, "/vb/a", &[], "hello").await;
    assert_eq!(short.status(), StatusCode::NOT_FOUND);
    // A delete of a bucket never made is 404, not a bucket made and deleted.
    let delete = send(base, Method::DELETE, "/storage/v1/b/never-made", &[], "").await;
    assert_eq!(delete.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn every_setting_comes_from_the_environment() {
    let plan = std::env::temp_dir().join(format!("fake-gcs-env-{}.toml", std::process::id()));
    std::fs::write(&plan, "[[refuse]]\nprefix = \"poison/\"\n").unwrap();
    let fake = start(
        &[],
        &[
            ("FAKE_GCS_LISTEN", "127.0.0.1:0"),
            ("FAKE_GCS_BUCKETS", "one,two"),
            ("FAKE_GCS_DROP_BYTES", "1"),
            ("FAKE_GCS_SEED", "7"),
            ("FAKE_GCS_FAULTS", plan.to_str().unwrap()),
        ],
    );
    let _ = std::fs::remove_file(&plan);
    assert!(fake.banner.contains("seed=7"), "{}", fake.banner);
    assert!(fake.banner.contains("keep_bytes=false"), "{}", fake.banner);
    let base = &fake.base;
    assert_eq!(
        send(base, Method::GET, "/storage/v1/b/two", &[], "")
            .await
            .status(),
        StatusCode::OK
    );
    let missing = send(base, Method::GET, "/storage/v1/b/three", &[], "").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        send(base, Method::PUT, "/one/a", &[], "x").await.status(),
        StatusCode::OK
    );
    let dropped = send(base, Method::GET, "/one/a", &[], "").await;
    assert_eq!(dropped.status(), StatusCode::NOT_IMPLEMENTED);
    let poison = send(base, Method::PUT, "/one/poison/a", &[], "x").await;
    assert_eq!(poison.status(), StatusCode::FORBIDDEN);
}

#[test]
fn an_unreadable_plan_stops_it_with_the_path_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_fake-gcs"))
        .args(["--listen", "127.0.0.1:0"])
        .env("FAKE_GCS_FAULTS", "/nonexistent/plan.toml")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the fault plan /nonexistent/plan.toml"),
        "{stderr}"
    );
}

#[tokio::test]
async fn with_a_certificate_it_serves_https_and_only_https() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("fake-gcs-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    let fake = start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--bucket",
            "bkt",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &[],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        fake.banner.contains("scheme=\"https\"") || fake.banner.contains("scheme=https"),
        "{}",
        fake.banner
    );
    let port = fake.base.rsplit(':').next().unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(generated.cert.pem().as_bytes()).unwrap(),
        )
        .build()
        .unwrap();
    let https = format!("https://localhost:{port}");
    let put = client
        .put(format!("{https}/bkt/a"))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let get = client.get(format!("{https}/bkt/a")).send().await.unwrap();
    assert_eq!(get.text().await.unwrap(), "hello");
    // Plain HTTP to the same port gets no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/bkt/a"))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
}
