//! Deletes owed to the upstream. A `DELETE` of a spooled name takes every entry of
//! it back out of the spool; the upstream may hold a copy too (an upload's first
//! try, or a delivery attempt, that landed while its answer was lost), so the
//! `DELETE` goes upstream as well. When the upstream fails then (the outage that
//! spooled the object), the relay still answers 204 (the spooled object is gone
//! for good, and a tool's retry must not be told 503 for the whole outage) and owes
//! the upstream that delete: [`PendingDeletes`].
//!
//! What it promises:
//!
//! - An owed delete is durable before the 204: a file in `<spool dir>/deletes/`
//!   (JSON, a format version), written, synced and its directory synced, so a crash
//!   or a power loss does not forget it. A run on the same directory loads them.
//! - It deletes only a copy the relay may have written: the live object upstream is
//!   deleted (with `ifGenerationMatch` on its generation, so nothing written since
//!   is touched) only when its size and crc32c are those of one of the entries taken
//!   back; another object under the name, or none, settles it without a delete.
//! - A later upload of the name through the relay (stored or spooled) cancels it:
//!   what is written after the `DELETE` must never be deleted by it.
//! - Tried at once in a task of its own, then again with a delay from 1 s doubling to
//!   60 s while the upstream cannot answer; settled ones are removed (best effort: one
//!   left behind is loaded and settled again, which is harmless).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use spool::Spool;

use crate::passthrough::PassThrough;
use crate::relay::Relay;

/// The directory of owed deletes, beside the spool's `entries/`.
pub(crate) const DELETES_DIR: &str = "deletes";

/// The first pause between passes while the upstream fails, and the longest.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// One copy the upstream may hold of a name taken back: what an entry held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Copy {
    pub(crate) size: u64,
    pub(crate) crc32c: u32,
}

/// An owed delete as its file holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Owed {
    version: u32,
    name: String,
    copies: Vec<Copy>,
}

const VERSION: u32 = 1;

/// The deletes owed to the upstream, by file name.
#[derive(Debug, Default)]
pub(crate) struct PendingDeletes {
    owed: Mutex<BTreeMap<String, Owed>>,
    /// Whether a task is settling them now.
    settling: Mutex<bool>,
    /// Files written so far, for unique names.
    written: Mutex<u64>,
}

impl PendingDeletes {
    fn owed(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Owed>> {
        self.owed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dir(spool: &Spool) -> PathBuf {
        spool.dir().join(DELETES_DIR)
    }

    /// How many deletes are owed now.
    pub(crate) fn len(&self) -> usize {
        self.owed().len()
    }

    /// Owes the upstream the delete of `name`'s `copies`: durable when this
    /// returns `Ok`.
    pub(crate) async fn owe(
        &self,
        spool: &Spool,
        name: &str,
        copies: Vec<Copy>,
    ) -> std::io::Result<()> {
        let owed = Owed {
            version: VERSION,
            name: name.to_string(),
            copies,
        };
        let n = {
            let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
            *written += 1;
            *written
        };
        let file = format!("{}.{n}.delete", spool.clock().now_unix_ms());
        let dir = Self::dir(spool);
        let disk = spool.disk();
        disk.create_dir_all(&dir).await?;
        disk.sync_dir(spool.dir()).await?;
        let text = serde_json::to_vec(&owed).map_err(std::io::Error::other)?;
        let contents = spool::Contents::new(bytes::Bytes::from(text), bytes::Bytes::new());
        let tmp = dir.join(format!("{file}.tmp"));
        disk.write_and_rename(&tmp, &dir.join(&file), contents)
            .await?;
        disk.sync_dir(&dir).await?;
        self.owed().insert(file, owed);
        Ok(())
    }

    /// Loads the deletes an earlier run owed (a file that cannot be read or parsed
    /// is logged and left). Returns how many.
    pub(crate) async fn load(&self, spool: &Spool) -> usize {
        let dir = Self::dir(spool);
        let names = match spool.disk().list(&dir).await {
            Ok(names) => names,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
            Err(e) => {
                tracing::warn!(target: "spool_relay", dir = %dir.display(), "cannot list the owed deletes: {e}");
                return 0;
            }
        };
        let mut loaded = 0;
        for file in names.iter().filter(|n| n.ends_with(".delete")) {
            let read = spool.disk().read(&dir.join(file)).await;
            let parsed = read
                .map_err(|e| e.to_string())
                .and_then(|text| serde_json::from_slice::<Owed>(&text).map_err(|e| e.to_string()));
            match parsed {
                Ok(owed) if owed.version == VERSION => {
                    self.owed().insert(file.to_string(), owed);
                    loaded += 1;
                }
                Ok(owed) => {
                    tracing::warn!(target: "spool_relay", file, version = owed.version, "an owed delete of another format version: left")
                }
                Err(e) => {
                    tracing::warn!(target: "spool_relay", file, "an owed delete that cannot be read: left: {e}")
                }
            }
        }
        loaded
    }

    /// Cancels every delete owed for `name` (an upload of it was acknowledged).
    pub(crate) async fn cancel(&self, spool: &Spool, name: &str) {
        let files: Vec<String> = {
            let mut owed = self.owed();
            let files: Vec<String> = (owed.iter())
                .filter(|(_, owed)| owed.name == name)
                .map(|(file, _)| file.clone())
                .collect();
            for file in &files {
                owed.remove(file);
            }
            files
        };
        for file in files {
            self.remove_best_effort(spool, &file).await;
        }
    }

    /// Settles what is owed, in a task of its own, unless one runs: passes until
    /// nothing is owed, pausing between them while the upstream fails.
    pub(crate) fn settle_in_background(self: &std::sync::Arc<Self>, relay: &Relay) {
        {
            let mut settling = self.settling.lock().unwrap_or_else(|e| e.into_inner());
            if *settling || self.owed().is_empty() {
                return;
            }
            *settling = true;
        }
        let (this, relay) = (self.clone(), relay.downgrade());
        tokio::spawn(async move {
            let mut pause = RETRY_FIRST;
            loop {
                // Ends with the relay: what is still owed is loaded by the next run.
                let Some(live) = relay.upgrade() else {
                    *this.settling.lock().unwrap_or_else(|e| e.into_inner()) = false;
                    return;
                };
                let left = this.settle(&live).await;
                drop(live);
                if left == 0 {
                    let mut settling = this.settling.lock().unwrap_or_else(|e| e.into_inner());
                    // Owed meanwhile: another pass, by this task.
                    if this.owed().is_empty() {
                        *settling = false;
                        return;
                    }
                    continue;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        });
    }

    /// One pass over what is owed; how many are left (the upstream could not say).
    /// Each is settled in its name's turn (`SpooledObjects::finishing`), so never
    /// while an upload of the name is being made safe, which cancels it once
    /// acknowledged.
    async fn settle(&self, relay: &Relay) -> usize {
        let (spool, pass_through) = (relay.spool(), &relay.config().pass_through);
        let bucket = &relay.config().bucket;
        let owed: Vec<(String, Owed)> = self
            .owed()
            .iter()
            .map(|(file, owed)| (file.clone(), owed.clone()))
            .collect();
        let mut left = 0;
        for (file, owed) in owed {
            let _turn = relay.spooled_so_far().finishing(&owed.name).await;
            if !self.owed().contains_key(&file) {
                continue; // cancelled by an upload meanwhile
            }
            match settle_one(pass_through, bucket, &owed).await {
                Ok(deleted) => {
                    tracing::info!(
                        target: "spool_relay",
                        name = %owed.name,
                        deleted,
                        "an owed delete is settled upstream"
                    );
                    self.owed().remove(&file);
                    self.remove_best_effort(spool, &file).await;
                }
                Err(e) => {
                    tracing::debug!(target: "spool_relay", name = %owed.name, "an owed delete waits: {e}");
                    left += 1;
                }
            }
        }
        left
    }

    async fn remove_best_effort(&self, spool: &Spool, file: &str) {
        let dir = Self::dir(spool);
        if let Err(e) = spool.disk().remove(&dir.join(file)).await {
            tracing::warn!(target: "spool_relay", file, "an owed delete's file was not removed (it is settled again at the next start): {e}");
        }
        let _best_effort = spool.disk().sync_dir(&dir).await;
    }
}

/// Settles one owed delete: `Ok(true)` when a copy of the relay's was deleted,
/// `Ok(false)` when there was none to delete, `Err` when the upstream cannot say.
async fn settle_one(pass_through: &PassThrough, bucket: &str, owed: &Owed) -> Result<bool, String> {
    let Some(live) = pass_through.live_object(bucket, &owed.name).await? else {
        return Ok(false);
    };
    let ours = owed.copies.iter().any(|copy| {
        let crc32c = fake_gcs::wire::crc32c_base64(copy.crc32c);
        copy.size == live.size && live.crc32c.as_ref().is_none_or(|live| *live == crc32c)
    });
    if !ours {
        return Ok(false);
    }
    pass_through
        .delete_live(bucket, &owed.name, live.generation)
        .await?;
    Ok(true)
}
