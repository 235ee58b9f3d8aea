//! An object store for tests: [`FlakyStore`] wraps any store (an in-memory one by
//! default) and can be broken and healed, refuses poison names, and counts and
//! announces writes, so a test or a bench can wait for the n-th without polling. It
//! is a [`HookedStore`] whose hook, [`Flakiness`], decides every write.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, PutOptions, PutPayload, PutResult};

use crate::hooked::{HookedStore, PutHook};

/// How a [`FlakyStore`] answers writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Like the in-memory store.
    Healthy,
    /// Every write fails with a connection error (retryable).
    Down,
    /// Every write is refused with 403 (not retryable).
    Forbidden,
    /// Writes land, then the client sees a connection error (commit-then-fail).
    CommitThenFail,
    /// Writes never answer.
    Hang,
    /// Writes wait at a gate until [`FlakyStore::let_through`] lets them on, one
    /// permit each, then land as when healthy: a test knows when a write reached the
    /// store ([`FlakyStore::wait_for_attempts`]) and decides when it completes.
    Gated,
}

/// An object store that can be broken and healed, counting write attempts and
/// successful writes. Everything but writes passes through to the wrapped store
/// (`inner`, for setting up and reading back).
pub type FlakyStore = HookedStore<Flakiness>;

/// How a [`FlakyStore`] answers writes, and what it counts of them.
#[derive(Debug)]
pub struct Flakiness {
    mode: Mutex<Mode>,
    /// Names whose writes are refused with 403 whatever the mode (poison objects).
    poison_prefix: Mutex<Option<String>>,
    /// Names whose writes fail with a connection error (retryable) whatever the mode.
    failing_prefix: Mutex<Option<String>>,
    /// Names whose writes take `slow_delay` before the mode answers them.
    slow_prefix: Mutex<Option<String>>,
    slow_delay: Mutex<std::time::Duration>,
    /// Writes tried, whatever their result.
    pub put_attempts: AtomicU64,
    puts: AtomicU64,
    wake_at: AtomicU64,
    reached: tokio::sync::Notify,
    attempted: tokio::sync::Notify,
    gate: tokio::sync::Semaphore,
}

impl FlakyStore {
    /// An empty in-memory store in `mode`.
    pub fn new(mode: Mode) -> Arc<Self> {
        Self::wrapping(Arc::new(InMemory::new()), mode)
    }

    /// `inner`, answering writes in `mode`.
    pub fn wrapping(inner: Arc<dyn ObjectStore>, mode: Mode) -> Arc<Self> {
        HookedStore::wrap(inner, Flakiness::new(mode))
    }

    /// Names and bytes of every stored object, in name order.
    pub async fn contents(&self) -> Vec<(String, Bytes)> {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;
        let metas: Vec<ObjectMeta> = self.inner.list(None).try_collect().await.unwrap();
        let mut out = Vec::new();
        for meta in metas {
            let bytes = self
                .inner
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            out.push((meta.location.to_string(), bytes));
        }
        out.sort();
        out
    }
}

impl Flakiness {
    fn new(mode: Mode) -> Self {
        Self {
            mode: Mutex::new(mode),
            poison_prefix: Mutex::new(None),
            failing_prefix: Mutex::new(None),
            slow_prefix: Mutex::new(None),
            slow_delay: Mutex::new(std::time::Duration::ZERO),
            put_attempts: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            reached: tokio::sync::Notify::new(),
            attempted: tokio::sync::Notify::new(),
            gate: tokio::sync::Semaphore::new(0),
        }
    }

    /// Writes that succeeded so far.
    pub fn puts(&self) -> u64 {
        self.puts.load(Ordering::SeqCst)
    }

    /// Waits until `count` writes have succeeded.
    pub async fn wait_for_puts(&self, count: u64) {
        self.wake_at.store(count, Ordering::SeqCst);
        loop {
            let reached = self.reached.notified();
            tokio::pin!(reached);
            reached.as_mut().enable();
            if self.puts() >= count {
                // Disarmed: later puts (of another loop) pay no notification.
                self.wake_at.store(u64::MAX, Ordering::SeqCst);
                return;
            }
            reached.await;
        }
    }

    /// Waits until `count` writes have been tried, whatever their result.
    pub async fn wait_for_attempts(&self, count: u64) {
        loop {
            let attempted = self.attempted.notified();
            tokio::pin!(attempted);
            attempted.as_mut().enable();
            if self.put_attempts.load(Ordering::SeqCst) >= count {
                return;
            }
            attempted.await;
        }
    }

    /// Lets `writes` writes waiting at the gate of [`Mode::Gated`] (or arriving
    /// later) on to the store.
    pub fn let_through(&self, writes: usize) {
        self.gate.add_permits(writes);
    }

    fn count_put(&self) {
        let puts = self.puts.fetch_add(1, Ordering::SeqCst) + 1;
        if puts >= self.wake_at.load(Ordering::SeqCst) {
            self.reached.notify_waiters();
        }
    }

    /// Answers later writes in `mode`.
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Refuses writes of names starting with `prefix` with 403, whatever the mode.
    pub fn poison(&self, prefix: &str) {
        *self.poison_prefix.lock().unwrap() = Some(prefix.into());
    }

    /// Fails writes of names starting with `prefix` with a connection error (retryable),
    /// whatever the mode: one object the store keeps refusing while others land.
    pub fn fail_retryably(&self, prefix: &str) {
        *self.failing_prefix.lock().unwrap() = Some(prefix.into());
    }

    /// Makes writes of names starting with `prefix` take `delay` (tokio time) before
    /// the mode answers them: a slow success when healthy.
    pub fn slow(&self, prefix: &str, delay: std::time::Duration) {
        *self.slow_delay.lock().unwrap() = delay;
        *self.slow_prefix.lock().unwrap() = Some(prefix.into());
    }
}

/// True when `location` starts with the prefix held in `prefix`, if any.
fn starts_with(prefix: &Mutex<Option<String>>, location: &ObjectPath) -> bool {
    let prefix = prefix.lock().unwrap();
    prefix
        .as_deref()
        .is_some_and(|p| location.as_ref().starts_with(p))
}

fn connection_refused() -> object_store::Error {
    object_store::Error::Generic {
        store: "flaky",
        source: Box::new(HttpError::new(
            HttpErrorKind::Connect,
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        )),
    }
}

impl Flakiness {
    /// One write of `location` (`write` does it on the wrapped store), answered as
    /// the mode, the poison, failing and slow prefixes say, and counted.
    async fn write<T, F>(
        &self,
        location: &ObjectPath,
        write: impl FnOnce() -> F,
    ) -> object_store::Result<T>
    where
        F: Future<Output = object_store::Result<T>>,
    {
        self.put_attempts.fetch_add(1, Ordering::SeqCst);
        self.attempted.notify_waiters();
        let forbidden = || object_store::Error::PermissionDenied {
            path: location.to_string(),
            source: "forbidden".into(),
        };
        if starts_with(&self.poison_prefix, location) {
            return Err(forbidden());
        }
        if starts_with(&self.failing_prefix, location) {
            return Err(connection_refused());
        }
        if starts_with(&self.slow_prefix, location) {
            let delay = *self.slow_delay.lock().unwrap();
            tokio::time::sleep(delay).await;
        }
        let mode = *self.mode.lock().unwrap();
        match mode {
            Mode::Healthy => {
                let result = write().await?;
                self.count_put();
                Ok(result)
            }
            Mode::Down => Err(connection_refused()),
            Mode::Forbidden => Err(forbidden()),
            Mode::CommitThenFail => {
                write().await?;
                Err(connection_refused())
            }
            Mode::Hang => std::future::pending().await,
            Mode::Gated => {
                let permit = self.gate.acquire().await.expect("the gate is never closed");
                permit.forget();
                let result = write().await?;
                self.count_put();
                Ok(result)
            }
        }
    }
}

/// Puts and copies (the last step of a streamed write) are writes, answered as the
/// mode says; the start of a multipart upload fails while the store is down or
/// forbids writes, and goes through otherwise.
#[async_trait]
impl PutHook for Flakiness {
    async fn put(
        &self,
        inner: &Arc<dyn ObjectStore>,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.write(location, || inner.put_opts(location, payload, opts))
            .await
    }

    async fn copy(
        &self,
        inner: &Arc<dyn ObjectStore>,
        from: &ObjectPath,
        to: &ObjectPath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.write(to, || inner.copy_opts(from, to, options)).await
    }

    async fn put_multipart(
        &self,
        inner: &Arc<dyn ObjectStore>,
        location: &ObjectPath,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        match *self.mode.lock().unwrap() {
            Mode::Down => return Err(connection_refused()),
            Mode::Forbidden => {
                return Err(object_store::Error::PermissionDenied {
                    path: location.to_string(),
                    source: "forbidden".into(),
                });
            }
            _ => {}
        }
        inner.put_multipart_opts(location, opts).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_gated_write_lands_only_once_let_through() {
        let store = FlakyStore::new(Mode::Gated);
        let write = tokio::spawn({
            let store = store.clone();
            async move { store.put(&"a".into(), Bytes::from("a").into()).await }
        });
        store.wait_for_attempts(1).await;
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        assert!(!write.is_finished(), "the write passed a closed gate");
        assert_eq!(store.puts(), 0);

        store.let_through(1);
        write.await.unwrap().unwrap();
        assert_eq!(store.puts(), 1);
        assert_eq!(
            store.contents().await,
            [("a".to_string(), Bytes::from("a"))]
        );
    }
}
