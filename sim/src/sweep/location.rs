//! Where a sweep's result files go: a directory, or an object store URL
//! (`gs://BUCKET/PREFIX`, through `object_store`'s GCS client; an emulator such as
//! `fake-gcs` with `--endpoint` or `STORAGE_EMULATOR_HOST`). Shards on many
//! machines write to one store; `sim merge` reads it back.
//!
//! A file is written whole or not at all (a temp file renamed, in a directory; one
//! `PUT`, in a store), and a write to a store is tried three times.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt};

/// A results location.
#[derive(Clone)]
pub enum Location {
    /// A local directory.
    Dir(PathBuf),
    /// A prefix in an object store.
    Store {
        /// The URL as given.
        url: String,
        /// The store (its bucket).
        store: Arc<dyn ObjectStore>,
        /// The prefix inside the bucket (may be empty).
        prefix: String,
    },
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string())
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(dir) => write!(f, "{}", dir.display()),
            Location::Store { url, .. } => f.write_str(url),
        }
    }
}

/// Attempts of one store write.
const WRITE_ATTEMPTS: u32 = 3;

impl Location {
    /// `gs://BUCKET[/PREFIX]` (with `endpoint`, or `STORAGE_EMULATOR_HOST`, for an
    /// emulator), or a directory path.
    pub fn parse(text: &str, endpoint: Option<&str>) -> anyhow::Result<Location> {
        let Some(rest) = text.strip_prefix("gs://") else {
            if text.contains("://") {
                bail!("{text}: results go to a directory or gs://BUCKET/PREFIX");
            }
            return Ok(Location::Dir(PathBuf::from(text)));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let store = spool::connect::store_from_url(&format!("gs://{bucket}"), endpoint)
            .with_context(|| format!("cannot reach {text}"))?;
        Ok(Location::Store {
            url: text.to_string(),
            store,
            prefix: prefix.trim_matches('/').to_string(),
        })
    }

    fn store_path(prefix: &str, name: &str) -> anyhow::Result<StorePath> {
        let full = match prefix.is_empty() {
            true => name.to_string(),
            false => format!("{prefix}/{name}"),
        };
        StorePath::parse(&full).with_context(|| format!("{full:?} is not a store path"))
    }

    /// Writes `bytes` as the file `name`.
    pub async fn write(&self, name: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        match self {
            Location::Dir(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                let tmp = dir.join(format!(".{name}.tmp"));
                std::fs::write(&tmp, bytes)
                    .with_context(|| format!("cannot write {}", tmp.display()))?;
                std::fs::rename(&tmp, dir.join(name))
                    .with_context(|| format!("cannot write {}", dir.join(name).display()))
            }
            Location::Store { store, prefix, url } => {
                let path = Self::store_path(prefix, name)?;
                let bytes = bytes::Bytes::from(bytes);
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match store.put(&path, bytes.clone().into()).await {
                        Ok(_) => return Ok(()),
                        Err(e) if attempt < WRITE_ATTEMPTS => {
                            tracing::warn!(%url, %name, error = %e, "result write failed; retrying");
                            tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
                        }
                        Err(e) => {
                            return Err(e).with_context(|| format!("cannot write {name} to {url}"));
                        }
                    }
                }
            }
        }
    }

    /// Every file of a sweep here (results, `*.json`, and the shards' `*.rerun`
    /// files): (name, bytes), by name, each read once.
    pub async fn read_all(&self) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        let mut files = match self {
            Location::Dir(dir) => read_dir(dir)?,
            Location::Store { store, prefix, url } => {
                let under = (!prefix.is_empty())
                    .then(|| StorePath::parse(prefix))
                    .transpose()?;
                let metas: Vec<_> = store
                    .list(under.as_ref())
                    .try_collect()
                    .await
                    .with_context(|| format!("cannot list {url}"))?;
                let mut files = Vec::new();
                for meta in metas
                    .into_iter()
                    .filter(|m| is_sweep_file(m.location.as_ref()))
                {
                    let name = meta.location.filename().unwrap_or_default().to_string();
                    let get = store.get(&meta.location).await;
                    let bytes = get.with_context(|| format!("cannot read {name} from {url}"))?;
                    files.push((name, bytes.bytes().await?.to_vec()));
                }
                files
            }
        };
        files.sort();
        Ok(files)
    }
}

/// A result file, or a shard's rerun file.
fn is_sweep_file(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(super::shard::RERUN)
}

fn read_dir(dir: &std::path::Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if is_sweep_file(&name) && !name.starts_with('.') {
            let bytes = std::fs::read(dir.join(&name))
                .with_context(|| format!("cannot read {}", dir.join(&name).display()))?;
            files.push((name, bytes));
        }
    }
    Ok(files)
}
