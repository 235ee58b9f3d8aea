//! A real child process puts entries concurrently and prints each acknowledgement; the
//! parent kills it with SIGKILL mid-flight, reopens the spool, and checks that every
//! acknowledged put is present and intact. Three rounds, each continuing on the
//! previous rounds' spool.
//!
//! SIGKILL ends the process but not the kernel: this checks the spool's own logic
//! (acknowledge only after rename and directory sync, clean up temp files, never
//! reuse a sequence number). Power loss is the simulation's job (`sim`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use bytes::Bytes;
use spool::{Spool, SpoolConfig};

const CHILD_ENV: &str = "SPOOL_KILL_TEST_DIR";
const ACKS_BEFORE_KILL: usize = 150;

fn payload(name: &str) -> Bytes {
    let len = 64 + (crc32c::crc32c(name.as_bytes()) % 8192) as usize;
    name.bytes().cycle().take(len).collect::<Vec<u8>>().into()
}

/// The child: puts from 8 concurrent tasks until killed, printing `ACK <name>` after
/// each put returns. Only runs when the parent starts it.
#[test]
#[ignore = "run as a child process by every_acknowledged_put_survives_sigkill"]
fn child_puts_until_killed() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let round = std::env::var("SPOOL_KILL_TEST_ROUND").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let spool = Spool::open(&dir, SpoolConfig::default()).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|task| {
                let spool = spool.clone();
                let round = round.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        let name = format!("r{round}/t{task}/{i}");
                        spool.put(&name, payload(&name)).await.unwrap();
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ACK {name}").unwrap();
                        out.flush().unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn every_acknowledged_put_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_puts_until_killed",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .env("SPOOL_KILL_TEST_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut this_round = 0;
        while this_round < ACKS_BEFORE_KILL {
            let line = lines
                .next()
                .expect("child exited before it was killed")
                .unwrap();
            if let Some(name) = line.strip_prefix("ACK ") {
                acked.push(name.to_string());
                this_round += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Acknowledgements already written before the kill count too.
        for line in lines.map_while(Result::ok) {
            if let Some(name) = line.strip_prefix("ACK ") {
                acked.push(name.to_string());
            }
        }
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (spool, report) = Spool::open_with(
            dir.path(),
            SpoolConfig::default(),
            std::sync::Arc::new(spool::StdDisk),
            std::sync::Arc::new(spool::SystemClock),
            spool::Metrics::default(),
        )
        .await
        .unwrap();
        assert!(report.quarantined.is_empty(), "{:?}", report.quarantined);
        let mut found = BTreeMap::new();
        while let Some(claim) = spool.claim_oldest() {
            let (header, bytes) = spool.read(&claim).await.unwrap();
            assert!(
                found.insert(header.name.clone(), bytes).is_none(),
                "{} twice",
                header.name
            );
            spool.remove(claim).await.unwrap();
        }
        for name in &acked {
            let bytes = found
                .get(name)
                .unwrap_or_else(|| panic!("acknowledged put {name} lost"));
            assert_eq!(bytes, &payload(name), "{name} changed");
        }
        // Unacknowledged puts may or may not have landed, but nothing else appears.
        assert!(found.len() >= acked.len());
        assert!(found.keys().all(|n| n.starts_with('r')));
    });
}
