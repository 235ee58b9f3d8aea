//! Object stores named by URL, built the way the spool needs them (feature
//! `connect`, used by the `spool` command): the client's own retries off (the spool
//! retries, with its own clock and seeded jitter), and Cloud Storage emulators
//! reachable over plain HTTP.
//!
//! | URL | store |
//! |---|---|
//! | `gs://BUCKET` | Cloud Storage, credentials from the standard chain (`GOOGLE_APPLICATION_CREDENTIALS`, the metadata server, ...) |
//! | `gs://BUCKET` with an emulator endpoint (`--endpoint`, or `STORAGE_EMULATOR_HOST` as the official clients read it) | that endpoint, no credentials, HTTP allowed |
//! | `file:///PATH` | a local directory (`object_store`'s `LocalFileSystem`) |
//! | `memory://` | an in-memory store (tests) |
//!
//! Other schemes (`s3://`, `az://`, `https://`) are refused with an error that says so:
//! their clients are not built into this binary.

use std::sync::Arc;

use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
use object_store::{ClientOptions, ObjectStore, RetryConfig, StaticCredentialProvider};

/// Why a store URL could not be turned into a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Not a URL, or a URL without what its scheme needs.
    #[error("{url:?} is not a store URL: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A scheme whose client is not built in.
    #[error(
        "{url:?}: stores of scheme {scheme:?} are not built into this binary (gs, file and memory are)"
    )]
    Unsupported {
        /// The URL given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// The client refused its configuration (missing credentials, ...).
    #[error("cannot build the store for {url:?}: {source}")]
    Client {
        /// The URL given.
        url: String,
        /// The client's error.
        source: object_store::Error,
    },
}

/// The environment variable official Cloud Storage clients read for an emulator.
pub const EMULATOR_ENV: &str = "STORAGE_EMULATOR_HOST";

/// Retry settings for a store the spool writes through: none.
pub fn no_client_retries() -> RetryConfig {
    RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    }
}

/// The store `url` names. `endpoint` (or, when `None`, `STORAGE_EMULATOR_HOST`)
/// points `gs://` URLs at an emulator such as `fake-gcs`.
pub fn store_from_url(
    url: &str,
    endpoint: Option<&str>,
) -> Result<Arc<dyn ObjectStore>, ConnectError> {
    let bad = |reason: &str| ConnectError::BadUrl {
        url: url.into(),
        reason: reason.into(),
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme://"))?;
    let client = |source| ConnectError::Client {
        url: url.into(),
        source,
    };
    match scheme {
        "gs" => {
            let bucket = rest.trim_end_matches('/');
            if bucket.is_empty() || bucket.contains('/') {
                return Err(bad("gs:// URLs name a bucket only: gs://BUCKET"));
            }
            let emulator = endpoint
                .map(str::to_owned)
                .or_else(|| std::env::var(EMULATOR_ENV).ok().filter(|e| !e.is_empty()));
            gcs(bucket, emulator.as_deref()).map_err(client)
        }
        "file" => {
            let root = std::path::Path::new(rest);
            if !root.is_absolute() {
                return Err(bad("file:// URLs take an absolute path: file:///PATH"));
            }
            crate::disk::create_dir_all_durably(root)
                .map_err(|e| bad(&format!("cannot create {rest}: {e}")))?;
            let store =
                object_store::local::LocalFileSystem::new_with_prefix(root).map_err(client)?;
            let store = Arc::new(store);
            let synced = SyncedPuts {
                local: store.clone(),
                root: root.to_path_buf(),
            };
            Ok(crate::hooked::HookedStore::wrap(store, synced))
        }
        "memory" => Ok(Arc::new(object_store::memory::InMemory::new())),
        other => Err(ConnectError::Unsupported {
            url: url.into(),
            scheme: other.into(),
        }),
    }
}

fn gcs(bucket: &str, emulator: Option<&str>) -> object_store::Result<Arc<dyn ObjectStore>> {
    // reqwest is built without a bundled TLS provider: install ring's (twice is
    // harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = GoogleCloudStorageBuilder::from_env()
        .with_bucket_name(bucket)
        .with_retry(no_client_retries());
    let builder = match emulator {
        Some(endpoint) => {
            let base = if endpoint.contains("://") {
                endpoint.to_string()
            } else {
                format!("http://{endpoint}")
            };
            builder
                .with_base_url(&base)
                .with_credentials(Arc::new(StaticCredentialProvider::new(GcpCredential {
                    bearer: String::new(),
                })))
                .with_client_options(ClientOptions::new().with_allow_http(true))
        }
        None => builder,
    };
    Ok(Arc::new(builder.build()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_and_bad_urls_are_named() {
        let err = store_from_url("s3://bucket", None).unwrap_err();
        assert!(err.to_string().contains("\"s3\""), "{err}");
        let err = store_from_url("bucket", None).unwrap_err();
        assert!(err.to_string().contains("no scheme"), "{err}");
        let err = store_from_url("gs://bucket/prefix", None).unwrap_err();
        assert!(err.to_string().contains("gs://BUCKET"), "{err}");
        let err = store_from_url("file://relative", None).unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }

    #[tokio::test]
    async fn a_large_object_streams_into_a_local_directory_create_if_absent() {
        use crate::disk::Disk as _;
        let root = tempfile::tempdir().unwrap();
        let store = store_from_url(&format!("file://{}", root.path().display()), None).unwrap();
        let remote = crate::Remote::new(store);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payload");
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        crate::StdDisk
            .create_synced(&path, data.clone().into())
            .await
            .unwrap();
        let file = crate::remote::PayloadFile {
            disk: &crate::StdDisk,
            path: &path,
            offset: 0,
            len: data.len() as u64,
            crc32c: crc32c::crc32c(&data),
        };
        let timeout = std::time::Duration::from_secs(10);
        let attributes = object_store::Attributes::new();
        let put = remote.put_streamed_if_absent("a/b", "k", file, &attributes, 1000, timeout);
        put.await.unwrap();
        assert_eq!(std::fs::read(root.path().join("a/b")).unwrap(), data);
        let staging = root.path().join(crate::remote::STAGING_PREFIX);
        let left = std::fs::read_dir(&staging).map_or(0, |d| d.count());
        assert_eq!(left, 0, "a staging file was left");
        let again = remote.put_streamed_if_absent("a/b", "k", file, &attributes, 1000, timeout);
        assert!(matches!(
            again.await,
            Err(crate::remote::StreamError::Store(
                crate::StoreError::AlreadyExists { .. }
            ))
        ));
    }

    #[test]
    fn an_emulator_endpoint_gives_a_store_without_credentials() {
        assert!(store_from_url("gs://bkt", Some("127.0.0.1:4443")).is_ok());
        assert!(store_from_url("memory://", None).is_ok());
    }
}

/// Makes every write to a local directory durable before it is answered:
/// `object_store`'s `LocalFileSystem` writes a temp file and renames it without an
/// fsync, so a drain that removed its spool entry once the write returned could lose
/// the object at a power loss. After the write: fsync the file, then every directory
/// from its own up to the store's root (the directories it may have created).
#[derive(Debug)]
struct SyncedPuts {
    local: Arc<object_store::local::LocalFileSystem>,
    root: std::path::PathBuf,
}

#[async_trait::async_trait]
impl crate::hooked::PutHook for SyncedPuts {
    async fn put(
        &self,
        inner: &Arc<dyn ObjectStore>,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        let result = inner.put_opts(location, payload, opts).await?;
        self.synced(location).await?;
        Ok(result)
    }

    /// A copy (the last step of a streamed write) is made durable as a put is.
    async fn copy(
        &self,
        inner: &Arc<dyn ObjectStore>,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        inner.copy_opts(from, to, options).await?;
        self.synced(to).await
    }
}

impl SyncedPuts {
    /// fsyncs the file at `location` and its directories up to the root.
    async fn synced(&self, location: &object_store::path::Path) -> object_store::Result<()> {
        let file = self.local.path_to_filesystem(location)?;
        let root = self.root.clone();
        let synced = tokio::task::spawn_blocking(move || sync_file_and_dirs(&file, &root)).await;
        match synced {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(e),
            }),
            Err(e) => Err(object_store::Error::JoinError { source: e }),
        }
    }
}

/// fsync of `file`, then of each directory from its parent up to `root`.
fn sync_file_and_dirs(file: &std::path::Path, root: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    for dir in file.ancestors().skip(1) {
        std::fs::File::open(dir)?.sync_all()?;
        if dir == root {
            break;
        }
    }
    Ok(())
}
