//! Model-based test: random put / drain / release / dead-letter / corrupt / reopen
//! sequences run against a real spool in a temp directory and against a tiny
//! in-memory model; after every step they must agree on the entries, their order
//! (each name's oldest entry claimable, no other), their bytes and the counts. A corrupted entry is never handed out as valid: the
//! read that would upload it fails verification and the entry is quarantined.
//!
//! `PROPTEST_CASES=5000 cargo test -p spool --test model` runs more cases.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use spool::entry;
use spool::layout::ENTRIES_DIR;
use spool::{FullReason, PutError, Spool, SpoolConfig};

const MAX_FILES: u64 = 6;
const MAX_BYTES: u64 = 9_000;

#[derive(Debug, Clone)]
enum Action {
    Put {
        name: u8,
        len: usize,
    },
    /// Claim the oldest entry and remove it, as after a successful upload.
    DrainOldest,
    /// Claim the oldest entry, read it, and let the claim go.
    ReadAndRelease,
    DeadLetterOldest,
    /// Cut a byte off the oldest entry's file: its next read must fail verification.
    CorruptOldest,
    Reopen,
}

#[derive(Debug, Clone, Default)]
struct Model {
    /// seq -> (name, payload length, corrupted)
    entries: BTreeMap<u64, (String, usize, bool)>,
    next_seq: u64,
    /// Highest sequence number moved to dead-letter/ or quarantine/.
    set_aside_max: u64,
    dead_letters: u64,
    quarantined: u64,
    /// What the last put must have answered: its sequence number, or why it was full.
    last_put: Option<Result<u64, FullReason>>,
}

fn name(n: u8) -> String {
    format!("obj/{n}")
}

fn payload(name: &str, len: usize) -> Bytes {
    name.bytes().cycle().take(len).collect::<Vec<u8>>().into()
}

impl Model {
    fn bytes(&self) -> u64 {
        self.entries
            .values()
            .map(|(n, len, _)| entry::file_bytes(n.len(), 0, *len as u64))
            .sum()
    }

    /// What a put of this size must answer, given the state before it.
    fn put_verdict(&self, name: &str, len: usize) -> Result<(), FullReason> {
        let size = entry::file_bytes(name.len(), 0, len as u64);
        if self.entries.len() as u64 >= MAX_FILES {
            return Err(FullReason::Files {
                max_files: MAX_FILES,
            });
        }
        if self.bytes() + size > MAX_BYTES {
            return Err(FullReason::Bytes {
                max_bytes: MAX_BYTES,
            });
        }
        Ok(())
    }

    fn reopened(mut self) -> Self {
        let max = self.entries.keys().next_back().copied().unwrap_or(0);
        self.next_seq = max.max(self.set_aside_max) + 1;
        self
    }
}

struct Reference;

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Action;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model {
            next_seq: 1,
            ..Model::default()
        })
        .boxed()
    }

    fn transitions(_: &Model) -> BoxedStrategy<Action> {
        prop_oneof![
            6 => (0u8..8, 0usize..2500).prop_map(|(name, len)| Action::Put { name, len }),
            3 => Just(Action::DrainOldest),
            1 => Just(Action::ReadAndRelease),
            1 => Just(Action::DeadLetterOldest),
            1 => Just(Action::CorruptOldest),
            1 => Just(Action::Reopen),
        ]
        .boxed()
    }

    fn apply(mut state: Model, action: &Action) -> Model {
        match action {
            Action::Put { name: n, len } => {
                let name = name(*n);
                let verdict = state.put_verdict(&name, *len).map(|()| state.next_seq);
                if let Ok(seq) = verdict {
                    state.entries.insert(seq, (name, *len, false));
                    state.next_seq += 1;
                }
                state.last_put = Some(verdict);
            }
            Action::DrainOldest => {
                if let Some((seq, (_, _, corrupt))) = state.entries.pop_first()
                    && corrupt
                {
                    state.set_aside_max = state.set_aside_max.max(seq);
                    state.quarantined += 1;
                }
            }
            Action::ReadAndRelease => {
                if let Some((&seq, (_, _, true))) = state.entries.first_key_value() {
                    state.entries.remove(&seq);
                    state.set_aside_max = state.set_aside_max.max(seq);
                    state.quarantined += 1;
                }
            }
            Action::DeadLetterOldest => {
                if let Some((seq, _)) = state.entries.pop_first() {
                    state.set_aside_max = state.set_aside_max.max(seq);
                    state.dead_letters += 1;
                }
            }
            Action::CorruptOldest => {
                if let Some((_, (_, _, corrupt))) = state.entries.iter_mut().next() {
                    *corrupt = true;
                }
            }
            Action::Reopen => state = state.reopened(),
        }
        state
    }
}

struct System {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    spool: Option<Spool>,
}

impl System {
    fn spool(&self) -> &Spool {
        self.spool.as_ref().unwrap()
    }

    fn reopen(&mut self) {
        self.spool = None;
        let config = SpoolConfig {
            max_files: MAX_FILES,
            max_bytes: MAX_BYTES,
            remove_sync_batch: 2,
        };
        let spool = self
            .rt
            .block_on(Spool::open(self.dir.path(), config))
            .unwrap();
        self.spool = Some(spool);
    }
}

struct SpoolTest;

impl StateMachineTest for SpoolTest {
    type SystemUnderTest = System;
    type Reference = Reference;

    fn init_test(_: &Model) -> System {
        let mut system = System {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            dir: tempfile::tempdir().unwrap(),
            spool: None,
        };
        system.reopen();
        system
    }

    fn apply(mut sys: System, after: &Model, action: Action) -> System {
        let spool = sys.spool().clone();
        match action {
            Action::Put { name: n, len } => {
                let name = name(n);
                let result = sys.rt.block_on(spool.put(&name, payload(&name, len)));
                let answered = match result {
                    Ok(receipt) => Ok(receipt.seq),
                    Err(PutError::Full(reason)) => Err(reason),
                    Err(e) => panic!("unexpected put error: {e}"),
                };
                assert_eq!(Some(answered), after.last_put);
            }
            Action::DrainOldest => {
                if let Some(claim) = spool.claim_oldest() {
                    match sys.rt.block_on(spool.read(&claim)) {
                        Ok(_) => sys.rt.block_on(spool.remove(claim)).unwrap(),
                        Err(e) => sys
                            .rt
                            .block_on(spool.quarantine(claim, &e.to_string()))
                            .unwrap(),
                    }
                }
            }
            Action::ReadAndRelease => {
                if let Some(claim) = spool.claim_oldest() {
                    let read = sys.rt.block_on(spool.read(&claim));
                    let Ok((header, bytes)) = read else {
                        assert!(
                            !after.entries.contains_key(&claim.seq()),
                            "a valid entry failed: {read:?}"
                        );
                        sys.rt.block_on(spool.quarantine(claim, "corrupt")).unwrap();
                        return sys;
                    };
                    let (name, len, _) = &after.entries[&claim.seq()];
                    assert_eq!(&header.name, name);
                    assert_eq!(bytes, payload(name, *len));
                }
            }
            Action::DeadLetterOldest => {
                if let Some(claim) = spool.claim_oldest() {
                    sys.rt
                        .block_on(spool.dead_letter(claim, "refused"))
                        .unwrap();
                }
            }
            Action::CorruptOldest => {
                if let Some(claim) = spool.claim_oldest() {
                    let file = sys.dir.path().join(ENTRIES_DIR).join(claim.file_name());
                    drop(claim);
                    cut_last_byte(&file);
                }
            }
            Action::Reopen => {
                drop(spool);
                sys.reopen();
            }
        }
        sys
    }

    fn check_invariants(sys: &System, model: &Model) {
        let stats = sys.spool().stats();
        assert_eq!(stats.files, model.entries.len() as u64, "files");
        assert_eq!(stats.bytes, model.bytes(), "bytes");
        assert_eq!(stats.claimed, 0, "claims leaked");
        assert_eq!(stats.dead_letter_files, model.dead_letters, "dead letters");
        assert_eq!(stats.quarantined_files, model.quarantined, "quarantined");
        let oldest = sys.spool().claim_oldest().map(|c| c.seq());
        assert_eq!(oldest, model.entries.keys().next().copied(), "oldest");
        // What the drainer may take: the oldest entry of each name, oldest first.
        let claimable: Vec<u64> = (sys.spool().claim_oldest_batch(usize::MAX, u64::MAX, 1))
            .iter()
            .map(|c| c.seq())
            .collect();
        let mut firsts = BTreeMap::new();
        for (&seq, (name, ..)) in &model.entries {
            firsts.entry(name.clone()).or_insert(seq);
        }
        let mut firsts: Vec<u64> = firsts.into_values().collect();
        firsts.sort_unstable();
        assert_eq!(claimable, firsts, "claimable: each name's oldest entry");
    }
}

/// Cuts the last byte off (a second cut keeps it corrupt; a second bit flip would
/// not).
fn cut_last_byte(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes.pop();
    std::fs::write(path, bytes).unwrap();
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok());
    Config {
        cases: cases.unwrap_or(48),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/proptest-regressions/model.txt",
        ))),
        ..Config::default()
    }
}

prop_state_machine! {
    #![proptest_config(config())]
    #[test]
    fn the_spool_agrees_with_a_tiny_model(sequential 1..40 => SpoolTest);
}
