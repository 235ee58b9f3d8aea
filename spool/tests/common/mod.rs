//! Shared by the tests that run Prometheus's own tools (see
//! `spool::testing::tools`).

use std::path::Path;

pub use spool::testing::tools::tool;

/// The repository's `spool/` directory.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
