//! Graceful shutdown (what SIGTERM does): the server stops accepting, the request
//! in flight finishes and is answered, and only then does `serve` return.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use common::{BUCKET, Harness, PATIENCE, Setup, outcome};
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt as _, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tokio::sync::{Notify, Semaphore};

/// An in-memory store whose writes wait at a gate: a test knows when a write has
/// reached the store and decides when it completes.
#[derive(Debug)]
struct GateStore {
    inner: InMemory,
    /// Notified when a write arrives.
    entered: Notify,
    /// One permit lets one write through.
    open: Semaphore,
}

impl std::fmt::Display for GateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GateStore")
    }
}

#[async_trait]
impl ObjectStore for GateStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.entered.notify_one();
        let _permit = self.open.acquire().await.expect("the gate is never closed");
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[tokio::test]
async fn shutdown_stops_accepting_and_finishes_the_request_in_flight() {
    let gate = Arc::new(GateStore {
        inner: InMemory::new(),
        entered: Notify::new(),
        open: Semaphore::new(0),
    });
    let mut h = Harness::writing_to(gate.clone(), Setup::default()).await;
    let addr = h.base.trim_start_matches("http://").to_string();
    let url = format!(
        "{}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=in-flight",
        h.base
    );
    let request = tokio::spawn(h.http.post(url).body("in flight").send());
    tokio::time::timeout(PATIENCE, gate.entered.notified())
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
    gate.open.add_permits(1);
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
