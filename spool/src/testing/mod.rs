//! Test doubles for the seams, and the suite every [`Disk`](crate::Disk) must pass.
//! Compiled for the crate's own tests and with the `testing` feature; never part of a
//! production build.
//!
//! - [`FaultDisk`], [`MemDisk`]: disks that fail on command, or live in memory.
//! - [`HookedStore`]: the one delegating object store: writes go through a
//!   [`PutHook`], everything else to the wrapped store.
//! - [`FlakyStore`]: a hooked store that can be broken and healed.
//! - [`ManualClock`]: a wall clock that moves only when told.
//! - [`conformance`]: the `Disk` contract as a suite of checks.

mod clock;
pub mod conformance;
mod disk;
mod store;
pub mod tools;

use std::path::Path;
use std::sync::Arc;

pub use crate::hooked::{HookedStore, PutHook};
pub use clock::ManualClock;
pub use disk::{FaultDisk, MemDisk, Op};
pub use store::{Flakiness, FlakyStore, Mode};

/// A spool on a [`MemDisk`] with a manual clock, and the disk for inspection.
pub async fn mem_spool(config: crate::SpoolConfig) -> (crate::Spool, Arc<MemDisk>) {
    let disk = Arc::new(MemDisk::default());
    let (spool, _) = crate::Spool::open_with(
        Path::new("/spool"),
        config,
        disk.clone(),
        Arc::new(ManualClock::new(1_791_453_600_000)),
        crate::Metrics::default(),
    )
    .await
    .unwrap();
    (spool, disk)
}
