//! Who may write through the relay (docs/relay.md, "Who can write through the
//! relay"), over in-memory connections: with a token configured, a request without
//! it is refused 401 and nothing reaches the store or the spool; a request from a
//! browser (an `Origin` header) is refused 403 whatever its token; a relay on
//! loopback refuses a `Host` that is not a loopback name (DNS rebinding). Each
//! refusal is a Cloud Storage JSON error that says what to do.

mod common;

use common::{BUCKET, exchange, relay_without_server};
use relay::{Access, Connections, ServerConfig, Token};
use spool::testing::{FlakyStore, Mode};

const TOKEN: &str = "4f0c1d7e9a2b3c5d6e7f8091a2b3c4d5";

/// A media upload of `name` with `headers` (each `Name: value`), closing after.
fn upload(name: &str, headers: &[&str]) -> Vec<u8> {
    let mut request = format!(
        "POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name={name} \
         HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n"
    );
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\nhello");
    request.into_bytes()
}

/// A relay as `spool-relay --listen 127.0.0.1:PORT` with a token runs it.
async fn loopback_relay_with_token() -> (Connections, std::sync::Arc<FlakyStore>, spool::Spool) {
    let store = FlakyStore::new(Mode::Healthy);
    let (relay, spool, dir) = relay_without_server(store.clone()).await;
    std::mem::forget(dir); // the spool's directory outlives the test's connections
    let config = ServerConfig {
        access: Access::default()
            .loopback_hosts_only()
            .with_token(Token::new(TOKEN).unwrap()),
        ..ServerConfig::default()
    };
    (
        Connections::with_config(relay, &config).unwrap(),
        store,
        spool,
    )
}

#[tokio::test]
async fn without_the_token_an_upload_is_refused_401_and_nothing_is_written() {
    let (connections, store, spool) = loopback_relay_with_token().await;
    for auth in [
        None,
        Some("Bearer not-the-token-at-all-0123456789"),
        Some("Basic eDp5"),
    ] {
        let mut headers = vec!["Host: 127.0.0.1:4443"];
        let header = auth.map(|a| format!("Authorization: {a}"));
        headers.extend(header.as_deref());
        let answer = exchange(&connections, &upload("secret", &headers), false).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{auth:?}: {answer}");
        assert!(answer.contains("www-authenticate: Bearer"), "{answer}");
        assert!(answer.contains("spool-relay requires a token"), "{answer}");
        assert!(
            answer.contains("\"code\":401"),
            "a JSON API error: {answer}"
        );
    }
    assert_eq!(
        store.put_attempts.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert_eq!(spool.stats().files, 0);

    let bearer = format!("Authorization: Bearer {TOKEN}");
    let answer = exchange(
        &connections,
        &upload("secret", &["Host: 127.0.0.1:4443", &bearer]),
        false,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(store.puts(), 1);
}

#[tokio::test]
async fn a_browser_is_refused_403_whatever_its_token() {
    let (connections, store, _spool) = loopback_relay_with_token().await;
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let answer = exchange(
        &connections,
        &upload(
            "from-a-page",
            &[
                "Host: 127.0.0.1:4443",
                &bearer,
                "Origin: https://evil.example",
            ],
        ),
        false,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains("refuses requests from web browsers"),
        "{answer}"
    );
    assert_eq!(store.puts(), 0);

    // The library's default (no token, any Host): browsers are refused too.
    let (relay, _spool, _dir) = relay_without_server(store.clone()).await;
    let open = Connections::new(relay);
    let simple = upload("simple-request", &["Host: relay:4443", "Origin: null"]);
    let answer = exchange(&open, &simple, false).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    let answer = exchange(&open, &upload("server-side", &["Host: relay:4443"]), false).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_loopback_relay_refuses_a_host_that_is_not_a_loopback_name() {
    let (connections, store, _spool) = loopback_relay_with_token().await;
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let rebound = upload("rebound", &["Host: attacker.example:4443", &bearer]);
    let answer = exchange(&connections, &rebound, false).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("loopback name only"), "{answer}");
    for host in ["localhost:4443", "[::1]:4443"] {
        let name = format!("ok-{}", host.len());
        let host = format!("Host: {host}");
        let answer = exchange(&connections, &upload(&name, &[&host, &bearer]), false).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    assert_eq!(store.puts(), 2);
}
