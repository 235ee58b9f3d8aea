//! The bench's simulated disk passes the same `Disk` conformance suite as the
//! production `StdDisk` (spool::testing::conformance), so what the spool learns about
//! its disk in the simulation holds on a real one.

use std::path::Path;

use sim::simdisk::{DiskConfig, SimDisk};

#[tokio::test]
async fn the_simulated_disk_passes_the_disk_conformance_suite() {
    let disk = SimDisk::new(DiskConfig::default(), 7);
    spool::testing::conformance::run_all(&disk, Path::new("/conformance")).await;
}
