//! crashfs: a crash file system. A FUSE file system that passes every call through
//! to a backing directory and remembers what has not been made durable; on command it
//! loses power (drops that, by the crash model of [`model`]) and serves what is left,
//! and it injects I/O errors per operation kind ([`faults`]).

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
pub use error::Error;
#[cfg(feature = "fuse")]
pub use mount::{DEFAULT_BLOCK_BYTES, Mount, MountOptions, PowerLoss, Stats, mount, mount_with};
