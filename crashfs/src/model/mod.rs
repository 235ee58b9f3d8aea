//! The crash model: what a power loss keeps of what was not made durable, with no
//! FUSE and no I/O, its randomness from the caller's RNG.
//!
//! The model is that of `docs/crash-model.md` (what a power loss may keep, with its
//! sources) and of the simulated disk (`sim/src/simdisk/`):
//!
//! - data made durable by `fsync`/`fdatasync` survives;
//! - a file's unsynced data survives as one of: none of it, all of it, a zero-length
//!   file, or the new size with a random subset of blocks and zeros (or the old
//!   contents) elsewhere ([`fate`]);
//! - namespace operations (create, mkdir, rename, unlink, rmdir) since a directory's
//!   last sync survive as a random prefix, in issue order, per directory; a rename is
//!   atomic, in one directory or across two ([`namespace`]);
//! - syncing a directory makes its earlier operations durable, and those they depend
//!   on in other directories; syncing a file does not make its name durable;
//! - a failed sync drops what it covered for good: a later sync succeeds without it.
//!
//! [`fate`] holds the random decisions themselves, drawn exactly as the simulated
//! disk draws them; [`namespace`] and [`data`] keep the state those decisions apply
//! to, for a file system of inodes (crashfs).

pub mod data;
pub mod fate;
pub mod namespace;

#[cfg(test)]
mod tests;

pub use data::{FileData, Restore};
pub use fate::{
    CrashStates, Fate, draw_fate, failed_sync_keeps, keep_in_order, mixed_bytes,
    seed_keeping_almost_nothing,
};
pub use namespace::{Ino, Kind, Namespace, NamespaceError, ROOT};
