//! The session store driven by random sequences of opens, chunks (whole or broken
//! off), completions, cancels, the passing of time and restarts, against a model of
//! a few lines: what each request finds, and the table's totals, after every step.
//! Then the store's own failure paths: a failed sync latches, and concurrent opens
//! never overshoot `max_sessions`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fake_gcs::wire::Reply;
use proptest::prelude::*;
use spool::testing::{ManualClock, MemDisk};

use super::*;

const UNIT: u64 = 16;
const MAX_SESSIONS: usize = 3;
const MAX_SESSION_BYTES: u64 = 10 * UNIT;
const TTL: Duration = Duration::from_secs(24 * 3600);
const START_MS: u64 = 1_800_000_000_000;

#[derive(Debug, Clone)]
enum Action {
    Open,
    /// `units` of bytes to the `session`-th session opened; broken off (its request
    /// dropped after writing) or committed.
    Chunk {
        session: usize,
        units: u64,
        broken: bool,
    },
    Finish {
        session: usize,
    },
    Cancel {
        session: usize,
    },
    Wait {
        seconds: u64,
    },
    Restart,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::Open),
        6 => (0..6usize, 1..4u64, prop::bool::weighted(0.25))
            .prop_map(|(session, units, broken)| Action::Chunk { session, units, broken }),
        2 => (0..6usize).prop_map(|session| Action::Finish { session }),
        1 => (0..6usize).prop_map(|session| Action::Cancel { session }),
        2 => prop_oneof![Just(30u64), Just(3_000), Just(90_000)]
            .prop_map(|seconds| Action::Wait { seconds }),
        1 => Just(Action::Restart),
    ]
}

/// What the model knows of one session.
#[derive(Debug, Clone)]
struct Modelled {
    id: String,
    created_ms: u64,
    state: Modelled2,
}

#[derive(Debug, Clone, PartialEq)]
enum Modelled2 {
    Open { received: u64, leftover: u64 },
    Finished { finished_ms: u64 },
    Gone,
}

/// The model: the sessions opened, in order, and when the store next purges.
#[derive(Default)]
struct Model {
    sessions: Vec<Modelled>,
    next_purge_ms: u64,
    next_full_purge_ms: u64,
}

impl Model {
    fn alive(&self, s: &Modelled, now: u64) -> bool {
        let end = s.created_ms + TTL.as_millis() as u64;
        match s.state {
            Modelled2::Open { .. } => now <= end,
            Modelled2::Finished { finished_ms } => {
                now <= end.min(finished_ms + FINISHED_KEEP.as_millis() as u64)
            }
            Modelled2::Gone => false,
        }
    }

    fn open_count(&self) -> usize {
        let open = |s: &&Modelled| matches!(s.state, Modelled2::Open { .. });
        self.sessions.iter().filter(open).count()
    }

    fn finished_count(&self) -> usize {
        let finished = |s: &&Modelled| matches!(s.state, Modelled2::Finished { .. });
        self.sessions.iter().filter(finished).count()
    }

    fn bytes(&self) -> u64 {
        (self.sessions.iter())
            .map(|s| match s.state {
                Modelled2::Open { received, leftover } => received + leftover,
                _ => 0,
            })
            .sum()
    }

    /// The purge an open does, as the module doc states it.
    fn purge_before_open(&mut self, now: u64) {
        let full = self.open_count() >= MAX_SESSIONS;
        if now < self.next_purge_ms && !(full && now >= self.next_full_purge_ms) {
            return;
        }
        self.next_purge_ms = now + 60_000;
        self.next_full_purge_ms = now + 1_000;
        for i in 0..self.sessions.len() {
            if !self.alive(&self.sessions[i], now) {
                self.sessions[i].state = Modelled2::Gone;
            }
        }
    }

    /// A restart: what a load keeps.
    fn reload(&mut self, now: u64) {
        for i in 0..self.sessions.len() {
            if !self.alive(&self.sessions[i], now) {
                self.sessions[i].state = Modelled2::Gone;
            }
            if let Modelled2::Open { leftover, .. } = &mut self.sessions[i].state {
                *leftover = 0; // partial files are dropped at load
            }
        }
        self.next_purge_ms = 0;
        self.next_full_purge_ms = 0;
    }

    fn finish(&mut self, i: usize, now: u64) {
        self.sessions[i].state = Modelled2::Finished { finished_ms: now };
        while self.finished_count() > MAX_SESSIONS {
            let oldest = (0..self.sessions.len())
                .filter_map(|j| match self.sessions[j].state {
                    Modelled2::Finished { finished_ms } => Some((finished_ms, j)),
                    _ => None,
                })
                .min()
                .map(|(_, j)| j)
                .unwrap();
            self.sessions[oldest].state = Modelled2::Gone;
        }
    }
}

fn opening() -> Opening {
    Opening {
        bucket: "b".into(),
        query: "uploadType=resumable&name=o".into(),
        upload_content_type: None,
        resource: Bytes::new(),
    }
}

fn store(disk: &Arc<MemDisk>, clock: &Arc<ManualClock>, boot: u64) -> Arc<SessionStore> {
    let limits = Limits {
        max_sessions: MAX_SESSIONS,
        max_session_bytes: MAX_SESSION_BYTES,
        ttl: TTL,
    };
    let store = SessionStore::new(
        disk.clone(),
        Path::new("/spool"),
        clock.clone(),
        limits,
        Some(boot),
        "gs://b".into(),
    );
    Arc::new(store)
}

/// What a request of session `id` finds: `Err` for not found, the bytes received
/// when open, `None` when finished.
async fn found(store: &Arc<SessionStore>, id: &str) -> Result<Option<u64>, String> {
    match store.find(id, "b").await {
        Ok(Request::Open { received, .. }) => Ok(Some(received)),
        Ok(Request::Finished(_)) => Ok(None),
        Err(SessionError::NotFound) => Err("not found".into()),
        Err(e) => panic!("find failed: {e}"),
    }
}

async fn run(actions: Vec<Action>) {
    let disk = Arc::new(MemDisk::default());
    let clock = Arc::new(ManualClock::new(START_MS));
    let mut boot = 0;
    let mut store = store(&disk, &clock, boot);
    let mut model = Model::default();
    for action in actions {
        // Every step at its own millisecond: the oldest completed session is then
        // one the model can name (the store breaks ties by ID).
        clock.advance(Duration::from_millis(1));
        let now = clock.now_unix_ms();
        match action {
            Action::Open => {
                model.purge_before_open(now);
                let opened = store.open(opening()).await;
                match opened {
                    Ok(id) => {
                        assert!(model.open_count() < MAX_SESSIONS, "opened past the limit");
                        let state = Modelled2::Open {
                            received: 0,
                            leftover: 0,
                        };
                        model.sessions.push(Modelled {
                            id,
                            created_ms: now,
                            state,
                        });
                    }
                    Err(SessionError::TooManySessions { .. }) => {
                        assert_eq!(model.open_count(), MAX_SESSIONS, "refused below the limit");
                    }
                    Err(e) => panic!("open failed: {e}"),
                }
            }
            Action::Chunk {
                session,
                units,
                broken,
            } => {
                let Some(i) = (session < model.sessions.len()).then_some(session) else {
                    continue;
                };
                let id = model.sessions[i].id.clone();
                let alive = model.alive(&model.sessions[i], now);
                let expected = match (&mut model.sessions[i].state, alive) {
                    (Modelled2::Open { received, leftover }, true) => {
                        *leftover = 0; // removed before the request writes
                        Ok(Some(*received))
                    }
                    (Modelled2::Finished { .. }, true) => Ok(None),
                    _ => Err("not found".to_string()),
                };
                let Ok(Request::Open {
                    received, mut hold, ..
                }) = store.find(&id, "b").await
                else {
                    assert_eq!(found(&store, &id).await, expected, "{id}");
                    continue;
                };
                assert_eq!(Ok(Some(received)), expected, "{id}");
                let len = units * UNIT;
                let fits = model.bytes() + len <= MAX_SESSION_BYTES;
                match hold.reserve(len) {
                    Ok(()) => assert!(fits, "reserved past max_session_bytes"),
                    Err(SessionError::TooManyBytes { .. }) => {
                        assert!(!fits, "refused within max_session_bytes");
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                }
                let piece = Bytes::from(vec![i as u8; len as usize]);
                let crc32c = crc32c::crc32c(&piece);
                hold.append(received, piece).await.unwrap();
                let Modelled2::Open {
                    received: r,
                    leftover,
                } = &mut model.sessions[i].state
                else {
                    unreachable!()
                };
                if broken {
                    drop(hold);
                    *leftover = len;
                } else {
                    let chunk = Chunk {
                        offset: received,
                        len,
                        crc32c,
                    };
                    hold.commit(chunk).await.unwrap();
                    *r += len;
                }
            }
            Action::Finish { session } => {
                let Some(i) = (session < model.sessions.len()).then_some(session) else {
                    continue;
                };
                let id = model.sessions[i].id.clone();
                let open_and_alive = model.alive(&model.sessions[i], now)
                    && matches!(model.sessions[i].state, Modelled2::Open { .. });
                match store.find(&id, "b").await {
                    Ok(Request::Open { hold, .. }) => {
                        assert!(open_and_alive, "{id} found open");
                        store.finish(&hold, &Reply::new(200)).await.unwrap();
                        drop(hold);
                        model.finish(i, now);
                    }
                    Ok(Request::Finished(_)) => assert!(!open_and_alive),
                    Err(SessionError::NotFound) => {
                        assert!(!model.alive(&model.sessions[i], now), "{id} lost");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            Action::Cancel { session } => {
                let Some(i) = (session < model.sessions.len()).then_some(session) else {
                    continue;
                };
                let in_table = model.sessions[i].state != Modelled2::Gone;
                assert_eq!(store.forget(&model.sessions[i].id.clone()).await, in_table);
                model.sessions[i].state = Modelled2::Gone;
            }
            Action::Wait { seconds } => clock.advance(Duration::from_secs(seconds)),
            Action::Restart => {
                drop(store);
                boot += 1;
                store = self::store(&disk, &clock, boot);
                assert_eq!(
                    found(&store, "no-such-session").await,
                    Err("not found".into())
                );
                model.reload(now);
            }
        }
        let table = store.table();
        assert_eq!(table.open(), model.open_count(), "open sessions");
        assert_eq!(
            table.finished(),
            model.finished_count(),
            "finished sessions"
        );
        assert_eq!(table.bytes(), model.bytes(), "bytes held");
    }
    // Every session the model holds answers as the model says.
    let now = clock.now_unix_ms();
    for s in model.sessions.clone() {
        let expected = match s.state {
            _ if !model.alive(&s, now) => Err("not found".to_string()),
            Modelled2::Open { received, .. } => Ok(Some(received)),
            Modelled2::Finished { .. } => Ok(None),
            Modelled2::Gone => Err("not found".to_string()),
        };
        assert_eq!(found(&store, &s.id).await, expected, "{}", s.id);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "proptest-regressions/sessions.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_session_table_answers_and_counts_as_its_model(
        actions in prop::collection::vec(action(), 1..60)
    ) {
        runtime().block_on(run(actions));
    }
}

/// A store on the real disk (with injectable faults) in a new directory.
fn on_real_disk() -> (
    Arc<spool::testing::FaultDisk>,
    tempfile::TempDir,
    Arc<ManualClock>,
    Arc<SessionStore>,
) {
    let disk = Arc::new(spool::testing::FaultDisk::default());
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let limits = Limits {
        max_sessions: MAX_SESSIONS,
        max_session_bytes: MAX_SESSION_BYTES,
        ttl: TTL,
    };
    let store = SessionStore::new(
        disk.clone(),
        dir.path(),
        clock.clone(),
        limits,
        Some(1),
        "gs://b".into(),
    );
    (disk, dir, clock, Arc::new(store))
}

#[test]
fn concurrent_opens_never_overshoot_max_sessions() {
    // Found by review: `open` checked the count, awaited a create and a sync, then
    // counted, so opens that overlapped all passed the check. Each open here waits
    // in its create until all have started.
    runtime().block_on(async {
        let (_disk, _dir, _clock, store) = on_real_disk();
        let opens = (0..4 * MAX_SESSIONS).map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.open(opening()).await })
        });
        let results = futures::future::join_all(opens).await;
        let opened = results
            .into_iter()
            .filter(|r| r.as_ref().unwrap().is_ok())
            .count();
        assert_eq!(opened, MAX_SESSIONS);
        assert_eq!(store.table().open(), MAX_SESSIONS);
    });
}

#[test]
fn a_failed_sync_stops_session_writes_until_the_directory_syncs_again() {
    runtime().block_on(async {
        let (disk, dir, clock, store) = on_real_disk();
        let id = store.open(opening()).await.unwrap();
        let Request::Open { mut hold, .. } = store.find(&id, "b").await.unwrap() else {
            panic!("not open");
        };
        hold.reserve(UNIT).unwrap();
        hold.append(0, Bytes::from(vec![1; UNIT as usize]))
            .await
            .unwrap();
        disk.fail_next(spool::testing::Op::SyncDir, std::io::ErrorKind::Other);
        let chunk = Chunk {
            offset: 0,
            len: UNIT,
            crc32c: crc32c::crc32c(&[1; UNIT as usize]),
        };
        assert!(matches!(
            hold.commit(chunk).await,
            Err(SessionError::Io { .. })
        ));
        drop(hold);
        // Latched: the next open is refused, though the disk would sync now.
        let refused = store.open(opening()).await;
        assert!(
            matches!(refused, Err(SessionError::Stopped { .. })),
            "{refused:?}"
        );
        // A second later a request lists and syncs the directory, and goes on. The
        // chunk whose sync failed was never counted; its file is left over,
        // counted until removed, and removed by the session's next request.
        clock.advance(RECOVER_EVERY);
        let Request::Open { received, .. } = store.find(&id, "b").await.unwrap() else {
            panic!("not open");
        };
        assert_eq!(received, 0);
        assert_eq!(store.table().bytes(), 0);
        let files: Vec<String> = std::fs::read_dir(dir.path().join(SESSIONS_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            files,
            [files::opening_name(&id)],
            "a chunk never counted stayed"
        );
        assert!(store.open(opening()).await.is_ok());
    });
}
