//! The project's spool, unchanged (`StdDisk`), on crashfs: the `Disk` conformance
//! suite passes on the mount, and across power losses every acknowledged put
//! survives whole while puts in flight at the cut may or may not.

#![cfg(feature = "fuse")]

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::*;
use spool::{Spool, SpoolConfig, StdDisk};

#[test]
fn std_disk_passes_the_conformance_suite_on_crashfs() {
    let Some(fx) = Fixture::new("std_disk_passes_the_conformance_suite", 21) else {
        return;
    };
    let root = fx.path("conformance");
    std::fs::create_dir(&root).unwrap();
    runtime().block_on(spool::testing::conformance::run_all(&StdDisk, &root));
}

/// Every entry the spool holds that reads back whole: name -> payload. Claims are
/// kept until the end (a dropped claim is claimable again).
async fn readable_entries(spool: &Spool) -> BTreeMap<String, Bytes> {
    let mut found = BTreeMap::new();
    let mut held = Vec::new();
    loop {
        let claims = spool.claim_oldest_batch(64, 0, 1);
        if claims.is_empty() {
            return found;
        }
        for claim in &claims {
            if let Ok((header, payload)) = spool.read(claim).await {
                found.insert(header.name, payload);
            }
        }
        held.extend(claims);
    }
}

#[test]
fn a_spool_on_crashfs_keeps_every_acknowledged_put_across_power_losses() {
    let Some(fx) = Fixture::new("a_spool_on_crashfs_keeps_every_acknowledged_put", 22) else {
        return;
    };
    let dir = fx.path("spool");
    let mut acknowledged: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut unacknowledged_seen = 0;
    for round in 0..12u64 {
        // Each round is one life of the process: its runtime ends (every task and
        // every open file with it) before the power goes.
        let rt = runtime();
        rt.block_on(async {
            let spool = Spool::open(&dir, SpoolConfig::default())
                .await
                .expect("reopen after a power loss");
            let found = readable_entries(&spool).await;
            for (name, payload) in &acknowledged {
                assert_eq!(
                    found.get(name),
                    Some(payload),
                    "round {round}: acknowledged {name} lost or torn"
                );
            }
            unacknowledged_seen += found
                .keys()
                .filter(|n| !acknowledged.contains_key(*n))
                .count();
            let puts = (0..8).map(|i| {
                let (name, payload) = (
                    format!("r{round}/acked{i}"),
                    Bytes::from(vec![b'a' + i as u8; 5000 + i * 700]),
                );
                let spool = spool.clone();
                async move {
                    spool
                        .put(&name, payload.clone())
                        .await
                        .map(|_| (name, payload))
                }
            });
            for put in futures::future::join_all(puts).await {
                let (name, payload) = put.expect("a put on a healthy disk");
                acknowledged.insert(name, payload);
            }
            // In flight at the cut: never awaited.
            for i in 0..4 {
                let spool = spool.clone();
                tokio::spawn(async move {
                    spool
                        .put(
                            &format!("r{round}/inflight{i}"),
                            Bytes::from(vec![b'z'; 9000]),
                        )
                        .await
                });
            }
            tokio::task::yield_now().await;
        });
        drop(rt);
        fx.mount.power_loss_with_seed(round).unwrap();
    }
    let stats = fx.mount.stats();
    eprintln!(
        "spool on crashfs: {} acknowledged puts kept; {unacknowledged_seen} unacknowledged seen after a cut; {stats:?}",
        acknowledged.len()
    );
    assert_eq!(stats.crash_states.power_losses, 12);
    assert!(
        stats.crash_states.unsynced_ops_lost + stats.crash_states.unsynced_data_lost > 0,
        "no power loss put anything at stake: {stats:?}"
    );
}
