//! The library's errors: one enum a caller can match on.

use std::io;
use std::path::PathBuf;

use crate::faults::FaultError;

/// Why a mount, a power loss or a control command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backing directory cannot be read or written.
    #[error("backing directory {}: {source}", path.display())]
    Backing {
        /// The path that failed.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The backing directory holds something crashfs cannot serve.
    #[error("{}: {what} is not supported in a backing directory", path.display())]
    Unsupported {
        /// The entry.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The mount point and the backing directory contain each other.
    #[error("the mount point {} and the backing directory {} must not contain each other", mountpoint.display(), backing.display())]
    Nested {
        /// The mount point.
        mountpoint: PathBuf,
        /// The backing directory.
        backing: PathBuf,
    },
    /// Mounting failed (no /dev/fuse, no permission, not a directory).
    #[error("mount at {}: {source}", path.display())]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Unmounting failed.
    #[error("unmount {}: {source}", path.display())]
    Unmount {
        /// The mount point.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A power loss could not rewrite the backing directory; the mount's state is
    /// undefined from here on.
    #[error("power loss: rewriting the backing directory failed: {0}")]
    PowerLoss(io::Error),
    /// A fault setting was refused.
    #[error(transparent)]
    Fault(#[from] FaultError),
}
