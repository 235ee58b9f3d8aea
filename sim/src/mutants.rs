//! The mutant catalogue: deliberate, plausible bugs planted at the spool's seams (a
//! disk that lies, an object-store client that lies), each of which must make at
//! least one shipped scenario fail. `tests/mutants.rs` runs them all, prints the
//! kill table, and fails if any survives: a bench that cannot catch these cannot be
//! trusted to catch the real thing.
//!
//! Nothing here is compiled into the spool: the bugs enter through `spool::Disk`
//! (the simulated disk's [`DiskMutant`]) and `object_store::ObjectStore` (the
//! [`LyingStore`] wrapper around the production GCS client).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutOptions, PutPayload, PutResult};
use spool::testing::{HookedStore, PutHook};

pub use crate::simdisk::DiskMutant;

/// A lie the object-store client tells the spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StoreMutant {
    /// A write is reported stored without being sent (a client that drops a
    /// request it believes it already sent).
    LosesWrites,
    /// "Already exists" is reported as success: the bytes there are never compared,
    /// so another writer's object passes for ours.
    ConflictAsSuccess,
    /// "Already exists" is reported as success when the object there has the same
    /// size: the check the spool made before it compared MD5s or bytes.
    ConflictSameSizeAsSuccess,
    /// Writes are sent without their attributes (content type, metadata): the
    /// spool's writes before entries kept them.
    DropsAttributes,
}

/// One planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mutant {
    /// At the disk seam.
    Disk(DiskMutant),
    /// At the object-store seam.
    Store(StoreMutant),
}

impl Mutant {
    /// Every mutant in the catalogue.
    pub const ALL: [Mutant; 10] = [
        Mutant::Disk(DiskMutant::DataNotSynced),
        Mutant::Disk(DiskMutant::ShortWriteIgnored),
        Mutant::Disk(DiskMutant::RenameNotAwaited),
        Mutant::Disk(DiskMutant::DirSyncSkipped),
        Mutant::Disk(DiskMutant::DirSyncErrorHidden),
        Mutant::Disk(DiskMutant::ListingDropsEntries),
        Mutant::Store(StoreMutant::LosesWrites),
        Mutant::Store(StoreMutant::ConflictAsSuccess),
        Mutant::Store(StoreMutant::ConflictSameSizeAsSuccess),
        Mutant::Store(StoreMutant::DropsAttributes),
    ];

    /// A short name for tables and logs.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::Disk(DiskMutant::DataNotSynced) => "no data fsync",
            Mutant::Disk(DiskMutant::ShortWriteIgnored) => "short write ignored",
            Mutant::Disk(DiskMutant::RenameNotAwaited) => "acknowledge before the rename",
            Mutant::Disk(DiskMutant::DirSyncSkipped) => "acknowledge before the directory sync",
            Mutant::Disk(DiskMutant::DirSyncErrorHidden) => "directory-sync error ignored",
            Mutant::Disk(DiskMutant::ListingDropsEntries) => "a listing that drops entries",
            Mutant::Store(StoreMutant::LosesWrites) => "remove before the upload landed",
            Mutant::Store(StoreMutant::ConflictAsSuccess) => {
                "a 412 treated as landed without comparing"
            }
            Mutant::Store(StoreMutant::ConflictSameSizeAsSuccess) => {
                "a 412 treated as landed on size alone"
            }
            Mutant::Store(StoreMutant::DropsAttributes) => "attributes dropped on the way",
        }
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An object store that tells the spool one [`StoreMutant`] lie; everything else
/// passes through (`LyingStore::wrap(inner, lie)`).
pub type LyingStore = HookedStore<StoreMutant>;

fn fake_result() -> PutResult {
    PutResult {
        e_tag: Some("\"lie\"".into()),
        version: None,
        extensions: Default::default(),
    }
}

#[async_trait]
impl PutHook for StoreMutant {
    async fn put(
        &self,
        inner: &Arc<dyn ObjectStore>,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match self {
            StoreMutant::LosesWrites => Ok(fake_result()),
            StoreMutant::ConflictAsSuccess => match inner.put_opts(location, payload, opts).await {
                Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. }) => Ok(fake_result()),
                other => other,
            },
            StoreMutant::DropsAttributes => {
                let opts = PutOptions {
                    attributes: Default::default(),
                    ..opts
                };
                inner.put_opts(location, payload, opts).await
            }
            StoreMutant::ConflictSameSizeAsSuccess => {
                let size = payload.content_length() as u64;
                match inner.put_opts(location, payload, opts).await {
                    Err(e @ object_store::Error::AlreadyExists { .. })
                    | Err(e @ object_store::Error::Precondition { .. }) => {
                        match inner.head(location).await {
                            Ok(meta) if meta.size == size => Ok(fake_result()),
                            _ => Err(e),
                        }
                    }
                    other => other,
                }
            }
        }
    }
}
