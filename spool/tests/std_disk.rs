//! `StdDisk`'s error paths on a real file system: tests that kill mutants
//! cargo-mutants found surviving in `spool/src/disk/` (docs/mutants.md).

use std::path::Path;
use std::sync::Arc;

use spool::{Disk, StdDisk};

/// A directory that cannot be created (a parent is a regular file) is an error, not
/// taken for one that already exists.
#[tokio::test]
async fn create_dir_all_reports_a_directory_it_cannot_create() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let dir = file.join("spool");
    // The file exists, so only `spool` under it is missing: its create fails
    // with ENOTDIR.
    let err = StdDisk.create_dir_all(&dir).await.unwrap_err();
    assert_ne!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert!(!dir.exists());
}

/// Two openers creating the same directories at once both succeed: a directory
/// that another creator made first (EEXIST between the check and the create) is
/// what was wanted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_create_dir_all_of_the_same_directories_all_succeed() {
    let root = tempfile::tempdir().unwrap();
    for round in 0..40 {
        let deep = Arc::new(root.path().join(format!("{round}/a/b/c/d/e/f")));
        let creators: Vec<_> = (0..8)
            .map(|_| {
                let deep = Arc::clone(&deep);
                tokio::spawn(async move { StdDisk.create_dir_all(Path::new(&*deep)).await })
            })
            .collect();
        for creator in creators {
            creator
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        assert!(deep.is_dir());
    }
}
