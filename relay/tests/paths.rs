//! The pass-through confined to its bucket (issue 52, findings 1-3): whatever path
//! a client sends, the upstream is asked only for the relay's bucket's own
//! resources, on a path the relay built from the route it checked.
//!
//! Two kinds of test: requests sent byte for byte (no client library resolves
//! their dot segments first) to a relay in front of a fake holding a second
//! bucket, and a property over generated paths: what the relay would send is
//! parsed as reqwest parses it and routed as the fake routes it, and must name the
//! relay's bucket only, and the very request the relay decided on.

mod common;

use common::{BUCKET, passing_through, raw};
use fake_gcs::wire::{Query, Routed};
use fake_gcs::{FakeGcs, FakeGcsConfig, TokioClock};
use http::{Method, Uri};
use proptest::prelude::*;

/// The bucket beside the relay's, which no request through it may reach.
const OTHER: &str = "other";

/// A fake holding [`BUCKET`] and [`OTHER`] (with `secret.txt`), and its base URL.
async fn fake_with_another_bucket() -> (FakeGcs, String) {
    // reqwest is built without a bundled TLS provider (twice is harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = FakeGcsConfig {
        buckets: vec![BUCKET.to_string(), OTHER.to_string()],
        keep_bytes: true,
        ..FakeGcsConfig::default()
    };
    let fake = FakeGcs::new(config, std::sync::Arc::new(TokioClock::start())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fake.clone().serve_tcp(listener));
    let upload = reqwest::Client::new()
        .post(format!(
            "{base}/upload/storage/v1/b/{OTHER}/o?uploadType=media&name=secret.txt"
        ))
        .body("the other bucket's secret")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 200);
    (fake, base)
}

#[tokio::test]
async fn no_path_reaches_another_bucket_or_the_upstreams_other_resources() {
    // Found by review (52/1, 52/2, 52/3): the raw path went upstream through
    // reqwest, whose URL parser resolved `..`, `%2e%2e` and `\` after the relay had
    // checked the bucket on the path as sent. Each of these read, listed, deleted
    // or changed what is not the relay's bucket with the relay's credentials.
    let (fake, fake_base) = fake_with_another_bucket().await;
    let h = passing_through(&fake_base).await;
    let iam_before = raw(&fake_base, "GET", "/storage/v1/b/other/iam", "").await;
    assert_eq!(iam_before.0, 200);
    let policy = r#"{"bindings":[{"role":"roles/storage.objectViewer","members":["allUsers"]}]}"#;
    let attacks = [
        ("GET", "/bkt/../other/secret.txt", ""),
        ("GET", "/bkt/%2e%2e/other/secret.txt", ""),
        ("GET", "/bkt/..\\other\\secret.txt", ""),
        (
            "GET",
            "/storage/v1/b/bkt/o/%2e%2e/%2e%2e/other/o/secret.txt?alt=media",
            "",
        ),
        (
            "GET",
            "/storage/v1/b/bkt/o/.%2e/.%2E/other/o/secret.txt",
            "",
        ),
        (
            "GET",
            "/download/storage/v1/b/bkt/o/../../other/o/secret.txt?alt=media",
            "",
        ),
        ("GET", "/storage/v1/b/bkt/o/../../other/o", ""),
        ("GET", "/storage/v1/b/bkt/o/../..", ""),
        ("DELETE", "/storage/v1/b/bkt/o/../../other/o/secret.txt", ""),
        ("DELETE", "/bkt/../other/secret.txt", ""),
        ("PUT", "/storage/v1/b/bkt/o/../../other/iam", policy),
        (
            "PATCH",
            "/storage/v1/b/bkt/o/..%2F..%2Fother/../../../other",
            "{}",
        ),
        (
            "POST",
            "/storage/v1/b/bkt/o/x/copyTo/b/other/o/planted",
            "{}",
        ),
        (
            "POST",
            "/storage/v1/b/bkt/o/x/rewriteTo/b/other/o/planted",
            "{}",
        ),
        (
            "POST",
            "/storage/v1/b/other/o/secret.txt/copyTo/b/bkt/o/stolen",
            "{}",
        ),
    ];
    let upload = reqwest::Client::new()
        .post(format!(
            "{fake_base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=x"
        ))
        .body("planted bytes");
    assert_eq!(upload.send().await.unwrap().status(), 200);
    for (method, target, body) in attacks {
        let (status, answer) = raw(&h.base, method, target, body).await;
        assert!(
            status == 400 || status == 404,
            "{method} {target}: {status} {answer}"
        );
        assert!(
            !answer.contains("bucket's secret"),
            "{method} {target}: {answer}"
        );
        assert!(
            !answer.contains("storage#object"),
            "{method} {target}: {answer}"
        );
        assert!(!answer.contains("\"items\""), "{method} {target}: {answer}");
    }
    assert!(fake.object(OTHER, "secret.txt").is_some(), "deleted");
    assert!(fake.object(OTHER, "planted").is_none(), "copied into");
    assert!(fake.object(BUCKET, "stolen").is_none(), "copied from");
    let iam_after = raw(&fake_base, "GET", "/storage/v1/b/other/iam", "").await;
    assert_eq!(iam_after, iam_before, "the other bucket's policy changed");
    // The relay's own bucket still reads, lists and copies within itself.
    let (status, _) = raw(&h.base, "GET", "/storage/v1/b/bkt/o/x?alt=media", "").await;
    assert_eq!(status, 200);
    let copy = "/storage/v1/b/bkt/o/x/copyTo/b/bkt/o/x%2Fcopy";
    let (status, answer) = raw(&h.base, "POST", copy, "{}").await;
    assert_eq!(status, 200, "{answer}");
    assert!(fake.object(BUCKET, "x/copy").is_some());
    h.stopped().await;
}

#[tokio::test]
async fn the_fake_refuses_what_the_relay_refuses() {
    // The bucket is the oracle: the fake routes the path as sent, and refuses the
    // same paths (400), so that a relay and its upstream never decide differently.
    let (fake, fake_base) = fake_with_another_bucket().await;
    for target in [
        "/bkt/../other/secret.txt",
        "/storage/v1/b/bkt/o/%2e%2e/%2e%2e/other/o/secret.txt?alt=media",
        "/storage/v1/b/bkt/o/../../other/iam",
        "/bkt/..\\other\\secret.txt",
    ] {
        let (status, answer) = raw(&fake_base, "GET", target, "").await;
        assert_eq!(status, 400, "{target}: {answer}");
    }
    assert!(fake.object(OTHER, "secret.txt").is_some());
}

/// How reqwest sends `path_and_query` to an upstream at `http://upstream`: the
/// path and query its URL parser makes of it.
fn as_reqwest_sends(path_and_query: &str) -> (String, Option<String>) {
    let url = url::Url::parse(&format!("http://upstream{path_and_query}")).unwrap();
    (url.path().to_string(), url.query().map(str::to_string))
}

/// What the fake makes of `method path?query`.
fn as_the_fake_routes(method: &Method, path_and_query: &str) -> Routed {
    let uri: Uri = path_and_query.parse().unwrap();
    Routed::parse(method, &uri, &Query::parse(uri.query()))
}

/// Path pieces that matter to routing and to URL parsers.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "/",
        "bkt",
        "other",
        "o",
        "b",
        "storage",
        "v1",
        "download",
        "upload",
        "..",
        ".",
        "%2e",
        "%2E",
        "%2e%2e",
        ".%2e",
        "%2F",
        "%2f",
        "\\",
        "%5c",
        "copyTo",
        "rewriteTo",
        "moveTo",
        "acl",
        "iam",
        "compose",
        "projects",
        "a",
        "x y",
        "%20",
        "%",
        "%zz",
        "é",
        "?",
        "&",
        "=",
        "alt=media",
        "#",
        ";",
        "//",
        "@",
        ":",
        "%3F",
        "%23",
    ])
}

fn method() -> impl Strategy<Value = Method> {
    prop::sample::select(vec![
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::PATCH,
        Method::POST,
        Method::DELETE,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4096,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(
                "proptest-regressions/paths.txt",
            ),
        )),
        ..ProptestConfig::default()
    })]

    /// For any request path, the upstream request either names the relay's own
    /// bucket's resources (and the very request the relay decided on) or is not
    /// sent.
    #[test]
    fn what_goes_upstream_names_the_relays_bucket_only(
        method in method(),
        pieces in prop::collection::vec(piece(), 0..12),
        prefix in prop::sample::select(vec![
            "/", "/bkt/", "/storage/v1/b/", "/storage/v1/b/bkt/o/", "/download/storage/v1/b/bkt/o/",
        ]),
    ) {
        let target = format!("{prefix}{}", pieces.concat());
        let Ok(uri) = target.parse::<Uri>() else {
            return Ok(()); // hyper would not have taken it either
        };
        let Some(sent) = relay::upstream_request(BUCKET, &method, &uri) else {
            return Ok(());
        };
        let (path, query) = as_reqwest_sends(&sent);
        let (sent_path, sent_query) = sent.split_once('?').map_or((sent.as_str(), None), |(p, q)| (p, Some(q)));
        prop_assert_eq!(&path, sent_path, "reqwest's URL parser changed the path of {}", sent);
        // The query may be escaped anew (a raw `é` as `%C3%A9`), to the same pairs.
        prop_assert_eq!(
            Query::parse(query.as_deref()),
            Query::parse(sent_query),
            "reqwest's URL parser changed the query of {}", sent
        );
        let reparsed = match &query {
            Some(query) => format!("{path}?{query}"),
            None => path.clone(),
        };
        let upstream = as_the_fake_routes(&method, &reparsed);
        prop_assert!(!upstream.buckets().is_empty(), "{} names no bucket: {:?}", sent, upstream);
        for bucket in upstream.buckets() {
            prop_assert_eq!(bucket, BUCKET, "{} reaches {:?}", sent, upstream);
        }
        let decided = as_the_fake_routes(&method, uri.path_and_query().unwrap().as_str());
        prop_assert_eq!(&upstream, &decided, "the upstream routes {} otherwise", sent);
    }
}
