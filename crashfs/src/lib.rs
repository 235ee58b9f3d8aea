//! crashfs: a crash file system. A FUSE file system that passes every call through
//! to a backing directory and remembers what has not been made durable; on command it
//! loses power (drops that, by the crash model of [`model`], the simulated disk's)
//! and then serves what is left; it also injects I/O errors per operation kind
//! ([`faults`]). It lets the real binaries (`spool-relay`, the `spool` CLI, anything)
//! be power-cut on a real kernel.
//!
//! ## Numbers
//!
//! - Unsynced data tears in blocks of 4096 bytes ([`DEFAULT_BLOCK_BYTES`], or
//!   `--block-bytes`).
//! - Memory: per file with unsynced changes, the durable bytes of each block changed
//!   since its last fsync (copy on first write) and one entry per changed block;
//!   nothing for a synced file. Per directory with unsynced namespace operations,
//!   those operations. Nothing is bounded: sync, or lose power, to free it.
//! - A power loss moves every surviving file once by rename (no data copied) and
//!   rewrites only the blocks its fate changes.
//! - Kernel caches: entry and attribute time to live 0, `FOPEN_DIRECT_IO` on every
//!   file, no writeback cache: each write, fsync and lookup reaches crashfs.
//!
//! ## Use
//!
//! ```no_run
//! # fn main() -> Result<(), crashfs::Error> {
//! use crashfs::faults::{Errno, OpKind};
//! let mount = crashfs::mount("/mnt/crash".as_ref(), "/var/tmp/backing".as_ref(), 42)?;
//! // ... run the program under test on /mnt/crash, then kill it (SIGKILL) ...
//! let produced = mount.power_loss()?; // serves the durable state when it returns
//! mount.set_fault(OpKind::Fsync, Errno::EIO, 0.1)?;
//! println!("{:?}", mount.stats());
//! # Ok(()) }
//! ```
//!
//! The binary: `crashfs MOUNT --backing DIR --seed N [--control PATH]`; the control
//! protocol on the socket is in [`control`]. Both are described, with what is left
//! out, in `crashfs/README.md`.
//!
//! ## Features
//!
//! `fuse` (default): the file system, [`Mount`], [`control`] and the binary. Without
//! it the crate is [`model`] and [`faults`] alone, with no FUSE and no I/O, for the
//! simulated disk to share.

#[cfg(feature = "fuse")]
pub mod control;
#[cfg(feature = "fuse")]
mod error;
pub mod faults;
#[cfg(feature = "fuse")]
mod fuse;
pub mod model;
#[cfg(feature = "fuse")]
mod mount;
#[cfg(feature = "fuse")]
mod stats;

#[cfg(feature = "fuse")]
pub use error::Error;
#[cfg(feature = "fuse")]
pub use mount::{DEFAULT_BLOCK_BYTES, Mount, MountOptions, mount, mount_with};
#[cfg(feature = "fuse")]
pub use stats::{PowerLoss, Stats};
