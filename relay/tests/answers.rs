//! What a client is told when the relay cannot make an upload safe stays the
//! client's business: the spool's local paths (its directory, the entry's temporary
//! file) go to the relay's log, never into the answer's body.

mod common;

use std::io::ErrorKind;
use std::sync::Arc;

use common::{BUCKET, exchange};
use relay::{Connections, Relay, RelayConfig};
use spool::testing::{FaultDisk, FlakyStore, ManualClock, Mode, Op};
use spool::{Metrics, Remote, Spool, SpoolConfig, SystemClock, Uploader, UploaderConfig};

#[tokio::test]
async fn a_spool_write_that_fails_is_503_without_the_spools_paths() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(FaultDisk::default());
    let (spool, _) = Spool::open_with(
        dir.path(),
        SpoolConfig::default(),
        disk.clone(),
        Arc::new(ManualClock::new(1_791_453_600_000)),
        Metrics::default(),
    )
    .await
    .unwrap();
    // The store is down, so the upload goes to the spool, whose disk fails it.
    let store = FlakyStore::new(Mode::Down);
    let uploader = Uploader::new(spool, Remote::new(store), UploaderConfig::default());
    let relay = Relay::new(RelayConfig::new(BUCKET), uploader, Arc::new(SystemClock)).unwrap();
    let connections = Connections::new(relay);
    for op in [Op::Append, Op::Create, Op::SyncFile, Op::Rename] {
        disk.fail_next(op, ErrorKind::PermissionDenied);
    }
    let request = format!(
        "POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name=x \
         HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\
         Connection: close\r\n\r\nhello"
    );
    let answer = exchange(&connections, request.as_bytes(), false).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let spool_dir = dir.path().to_str().unwrap();
    assert!(
        !answer.contains(spool_dir),
        "the answer names the spool's files: {answer}"
    );
    assert!(!answer.contains(".tmp"), "{answer}");
}
