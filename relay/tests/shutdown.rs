//! Graceful shutdown (what SIGTERM does): the server stops accepting, the request
//! in flight finishes and is answered, and only then does `serve` return.

mod common;

use common::{BUCKET, Harness, PATIENCE, Setup, outcome};
use object_store::ObjectStoreExt as _;
use object_store::path::Path;
use spool::testing::{FlakyStore, Mode};

#[tokio::test]
async fn shutdown_stops_accepting_and_finishes_the_request_in_flight() {
    // Its writes wait at a gate: the test knows when the upload reached the store
    // and decides when it completes.
    let gate = FlakyStore::new(Mode::Gated);
    let mut h = Harness::writing_to(gate.clone(), Setup::default()).await;
    let addr = h.base.trim_start_matches("http://").to_string();
    let url = format!(
        "{}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=in-flight",
        h.base
    );
    let request = tokio::spawn(h.http.post(url).body("in flight").send());
    tokio::time::timeout(PATIENCE, gate.wait_for_attempts(1))
        .await
        .expect("the upload reaches the store");

    h.stop();
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(
        !h.server.is_finished(),
        "serve returned while a request was in flight"
    );
    gate.let_through(1);
    let response = tokio::time::timeout(PATIENCE, request)
        .await
        .expect("the request in flight is answered")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(outcome(&response), "stored");
    h.stopped().await;

    let stored = gate.inner.get(&Path::from("in-flight")).await.unwrap();
    assert_eq!(&stored.bytes().await.unwrap()[..], b"in flight");
    let refused = tokio::net::TcpStream::connect(&addr).await;
    assert!(refused.is_err(), "a connection was accepted after shutdown");
}
