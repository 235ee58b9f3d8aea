//! [`HookedStore`]: the one delegating object store of the library, its tests and
//! the bench. Every call goes to the wrapped store, except writes (`put_opts`),
//! which a [`PutHook`] decides: make them durable (`connect`'s `file://` stores),
//! fail them, hold them, lie about them (test doubles), or pass them on. Wrappers
//! differ only in what they do to a write, so each is a hook, not another
//! hand-written list of a dozen delegating methods.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// What a [`HookedStore`] does with a write: anything, given the wrapped store.
/// Besides a put, an object is written by a copy (a streamed write's last step,
/// `remote/streamed.rs`), and a multipart upload is started: by default those go
/// to the wrapped store as they are.
#[async_trait]
pub trait PutHook: std::fmt::Debug + Send + Sync + 'static {
    /// Answers one `put_opts` of `location`; `inner` is the wrapped store.
    async fn put(
        &self,
        inner: &Arc<dyn ObjectStore>,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult>;

    /// Answers one `copy_opts` to `to`.
    async fn copy(
        &self,
        inner: &Arc<dyn ObjectStore>,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        inner.copy_opts(from, to, options).await
    }

    /// Answers the start of one multipart upload of `location`.
    async fn put_multipart(
        &self,
        inner: &Arc<dyn ObjectStore>,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        inner.put_multipart_opts(location, opts).await
    }
}

/// An object store whose writes go through `H` and whose other calls go straight to
/// the wrapped store. Derefs to its hook, so the hook's own methods (set a mode,
/// count writes) are called on the store.
#[derive(Debug)]
pub struct HookedStore<H> {
    /// The wrapped store, for setting up and reading back.
    pub inner: Arc<dyn ObjectStore>,
    hook: H,
}

impl<H: PutHook> HookedStore<H> {
    /// `inner`, with its writes answered by `hook`.
    pub fn wrap(inner: Arc<dyn ObjectStore>, hook: H) -> Arc<Self> {
        Arc::new(Self { inner, hook })
    }
}

impl<H> std::ops::Deref for HookedStore<H> {
    type Target = H;

    fn deref(&self) -> &H {
        &self.hook
    }
}

impl<H: std::fmt::Debug> std::fmt::Display for HookedStore<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} over {}", self.hook, self.inner)
    }
}

#[async_trait]
impl<H: PutHook> ObjectStore for HookedStore<H> {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.hook.put(&self.inner, location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.hook.put_multipart(&self.inner, location, opts).await
    }
    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn get_ranges(
        &self,
        location: &ObjectPath,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&ObjectPath>,
        offset: &ObjectPath,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.hook.copy(&self.inner, from, to, options).await
    }
}
