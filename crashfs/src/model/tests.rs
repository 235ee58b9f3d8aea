//! Tests of the model alone: the namespace's prefixes and atomic renames, and a
//! file's restore checked against a file kept whole in memory (live and durable
//! copies, as the simulated disk keeps them).

use std::ffi::OsStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// A namespace with a durable directory `d`.
fn ns() -> (Namespace, Ino) {
    let mut ns = Namespace::new();
    let d = ns.add_durable(ROOT, os("d"), Kind::Dir).unwrap();
    (ns, d)
}

fn names(ns: &Namespace, dir: Ino) -> Vec<String> {
    ns.list(dir)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn synced_names_survive_and_the_rest_is_a_prefix() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let (mut ns, d) = ns();
        ns.create(d, os("a"), Kind::File).unwrap();
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.create(d, os("b"), Kind::File).unwrap();
        ns.create(d, os("c"), Kind::File).unwrap();
        ns.power_loss(&mut rng(seed), &mut CrashStates::default());
        let names = names(&ns, d);
        assert!(
            [vec!["a"], vec!["a", "b"], vec!["a", "b", "c"]]
                .iter()
                .any(|p| p == &names),
            "seed {seed}: {names:?} is not a prefix"
        );
        seen.insert(names.len());
    }
    assert_eq!(seen.len(), 3, "every prefix occurs");
}

#[test]
fn a_rename_is_atomic_across_directories() {
    for seed in 0..200 {
        let (mut ns, d) = ns();
        let e = ns.add_durable(ROOT, os("e"), Kind::Dir).unwrap();
        let x = ns.create(d, os("x"), Kind::File).unwrap();
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.rename(d, os("x"), e, os("y")).unwrap();
        ns.power_loss(&mut rng(seed), &mut CrashStates::default());
        let here = ns.lookup(d, os("x")).ok();
        let there = ns.lookup(e, os("y")).ok();
        assert!(
            (here == Some(x)) ^ (there == Some(x)),
            "seed {seed}: {here:?} {there:?}"
        );
    }
}

#[test]
fn syncing_the_target_directory_makes_a_rename_durable_in_both() {
    let (mut ns, d) = ns();
    let e = ns.add_durable(ROOT, os("e"), Kind::Dir).unwrap();
    let x = ns.create(d, os("tmp"), Kind::File).unwrap();
    ns.rename(d, os("tmp"), e, os("x")).unwrap();
    ns.sync_dir::<ChaCha8Rng>(e, None);
    assert_eq!(ns.pending_ops(), 0, "the create in d went with the rename");
    ns.power_loss(&mut rng(1), &mut CrashStates::default());
    assert!(names(&ns, d).is_empty());
    assert_eq!(ns.lookup(e, os("x")), Ok(x));
    assert!(ns.renamed(x));
}

#[test]
fn a_directory_whose_entry_was_never_synced_can_vanish_with_its_files() {
    let mut states = CrashStates::default();
    for seed in 0..50 {
        let mut ns = Namespace::new();
        let d = ns.create(ROOT, os("d"), Kind::Dir).unwrap();
        ns.create(d, os("x"), Kind::File).unwrap();
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.power_loss(&mut rng(seed), &mut states);
        match ns.lookup(ROOT, os("d")) {
            Ok(d) => assert_eq!(names(&ns, d), ["x"], "seed {seed}"),
            Err(e) => assert_eq!(e, NamespaceError::NotFound),
        }
    }
    assert!(
        states.directories_lost > 0 && states.unsynced_ops_kept > 0,
        "{states:?}"
    );
}

#[test]
fn a_moved_directory_keeps_its_contents_under_either_name() {
    for seed in 0..100 {
        let (mut ns, d) = ns();
        let sub = ns.create(d, os("sub"), Kind::Dir).unwrap();
        let f = ns.create(sub, os("f"), Kind::File).unwrap();
        ns.sync_dir::<ChaCha8Rng>(sub, None);
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.rename(d, os("sub"), ROOT, os("moved")).unwrap();
        assert_eq!(ns.path(f).unwrap(), std::path::Path::new("moved/f"));
        ns.power_loss(&mut rng(seed), &mut CrashStates::default());
        let path = ns.path(f).expect("the file survives one way or the other");
        assert!(
            path == std::path::Path::new("moved/f") || path == std::path::Path::new("d/sub/f"),
            "seed {seed}: {path:?}"
        );
    }
}

#[test]
fn an_unsynced_removal_can_come_back_and_a_synced_one_cannot() {
    let mut back = 0;
    for seed in 0..100 {
        let (mut ns, d) = ns();
        let x = ns.create(d, os("x"), Kind::File).unwrap();
        let sub = ns.create(d, os("sub"), Kind::Dir).unwrap();
        ns.sync_dir::<ChaCha8Rng>(d, None);
        assert_eq!(
            ns.remove(d, os("sub"), Kind::File),
            Err(NamespaceError::IsDir)
        );
        assert_eq!(
            ns.remove(d, os("x"), Kind::Dir),
            Err(NamespaceError::NotDir)
        );
        ns.remove(d, os("x"), Kind::File).unwrap();
        ns.remove(d, os("sub"), Kind::Dir).unwrap();
        assert!(names(&ns, d).is_empty());
        ns.power_loss(&mut rng(seed), &mut CrashStates::default());
        back += u32::from(ns.lookup(d, os("x")) == Ok(x));
        if ns.lookup(d, os("x")).is_err() {
            assert!(ns.lookup(d, os("sub")).is_err() || ns.lookup(d, os("sub")) == Ok(sub));
        }
        let (mut ns, d) = self::ns();
        ns.create(d, os("x"), Kind::File).unwrap();
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.remove(d, os("x"), Kind::File).unwrap();
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.power_loss(&mut rng(seed), &mut CrashStates::default());
        assert!(names(&ns, d).is_empty(), "seed {seed}");
    }
    assert!(back > 0 && back < 100, "{back}");
}

#[test]
fn a_failed_directory_sync_drops_what_it_did_not_keep_for_good() {
    let mut lost = 0;
    for seed in 0..50 {
        let (mut ns, d) = ns();
        ns.create(d, os("x"), Kind::File).unwrap();
        ns.sync_dir(d, Some(&mut rng(seed)));
        assert_eq!(names(&ns, d), ["x"], "still visible");
        ns.sync_dir::<ChaCha8Rng>(d, None);
        ns.power_loss(&mut rng(seed), &mut CrashStates::default());
        lost += u32::from(names(&ns, d).is_empty());
    }
    assert!(lost > 0, "a dropped create never stayed dropped");
}

#[test]
fn renames_refuse_what_a_file_system_refuses() {
    let (mut ns, d) = ns();
    let sub = ns.create(d, os("sub"), Kind::Dir).unwrap();
    ns.create(sub, os("f"), Kind::File).unwrap();
    ns.create(d, os("g"), Kind::File).unwrap();
    assert_eq!(
        ns.rename(ROOT, os("d"), sub, os("x")),
        Err(NamespaceError::Invalid)
    );
    assert_eq!(
        ns.rename(d, os("g"), d, os("sub")),
        Err(NamespaceError::IsDir)
    );
    assert_eq!(
        ns.rename(d, os("sub"), d, os("g")),
        Err(NamespaceError::NotDir)
    );
    let empty = ns.create(d, os("empty"), Kind::Dir).unwrap();
    assert_eq!(
        ns.rename(d, os("empty"), d, os("sub")),
        Err(NamespaceError::NotEmpty)
    );
    assert_eq!(ns.rename(d, os("sub"), d, os("empty")), Ok(Some(empty)));
    assert_eq!(
        ns.create(d, os("g"), Kind::File),
        Err(NamespaceError::Exists)
    );
    assert_eq!(ns.lookup(d, os("nope")), Err(NamespaceError::NotFound));
}

#[test]
fn removed_inodes_are_freed_once_nothing_refers_to_them() {
    let (mut ns, d) = ns();
    let x = ns.create(d, os("x"), Kind::File).unwrap();
    ns.sync_dir::<ChaCha8Rng>(d, None);
    ns.take_freed();
    ns.remove(d, os("x"), Kind::File).unwrap();
    assert!(ns.take_freed().is_empty(), "still durably linked");
    ns.sync_dir::<ChaCha8Rng>(d, None);
    assert_eq!(ns.take_freed(), [x]);
    let y = ns.create(d, os("y"), Kind::File).unwrap();
    ns.remove(d, os("y"), Kind::File).unwrap();
    assert!(ns.take_freed().is_empty(), "its create may still survive");
    ns.power_loss(&mut rng(0), &mut CrashStates::default());
    assert_eq!(ns.take_freed(), [y]);
}

/// A file kept whole: live and durable copies, as the simulated disk keeps them.
struct Reference {
    live: Vec<u8>,
    durable: Vec<u8>,
}

fn read_from(live: &[u8]) -> impl FnMut(u64, usize) -> std::io::Result<Vec<u8>> + '_ {
    move |offset, len| {
        let start = (offset as usize).min(live.len());
        let end = (start + len).min(live.len());
        Ok(live[start..end].to_vec())
    }
}

fn apply(live: &[u8], restore: &Restore) -> Vec<u8> {
    let mut data = live.to_vec();
    data.resize(restore.len_bytes as usize, 0);
    for (offset, bytes) in &restore.writes {
        let at = *offset as usize;
        data[at..at + bytes.len()].copy_from_slice(bytes);
    }
    data
}

/// Random writes, truncations and syncs on a file; returns it and its model.
fn random_file(seed: u64, block: u64) -> (Reference, FileData) {
    let mut r = rng(seed);
    let initial: Vec<u8> = (0..r.random_range(0..40u8)).collect();
    let mut file = Reference {
        live: initial.clone(),
        durable: initial.clone(),
    };
    let mut data = FileData::durable(initial.len() as u64, block);
    for _ in 0..r.random_range(1..12) {
        let live_bytes = file.live.len() as u64;
        match r.random_range(0..10) {
            0..6 => {
                let offset = r.random_range(0..=live_bytes + 10);
                let bytes: Vec<u8> = (0..r.random_range(1..20)).map(|_| r.random()).collect();
                data.before_write(offset, bytes.len(), live_bytes, &mut read_from(&file.live))
                    .unwrap();
                let end = offset as usize + bytes.len();
                if file.live.len() < end {
                    file.live.resize(end, 0);
                }
                file.live[offset as usize..end].copy_from_slice(&bytes);
            }
            6..8 => {
                let new_bytes = r.random_range(0..=live_bytes + 20);
                data.before_set_len(new_bytes, live_bytes, &mut read_from(&file.live))
                    .unwrap();
                file.live.resize(new_bytes as usize, 0);
            }
            _ => {
                data.synced(live_bytes);
                file.durable = file.live.clone();
            }
        }
    }
    (file, data)
}

#[test]
fn restoring_a_file_gives_what_the_whole_copy_model_gives() {
    const BLOCK: u64 = 8;
    for seed in 0..2000 {
        let (file, data) = random_file(seed, BLOCK);
        let live_bytes = file.live.len() as u64;
        if !data.is_dirty(live_bytes) {
            assert_eq!(file.live, file.durable, "seed {seed}: clean but different");
        }
        let lost = apply(&file.live, &data.restore(&Fate::Lost, live_bytes));
        assert_eq!(lost, file.durable, "seed {seed}: lost");
        let mut r = rng(seed ^ 0xfeed);
        let revert: Vec<bool> = (0..live_bytes.div_ceil(BLOCK))
            .map(|_| r.random())
            .collect();
        let fate = Fate::Mixed {
            revert: revert.clone(),
        };
        let mixed = apply(&file.live, &data.restore(&fate, live_bytes));
        let expected = mixed_bytes(&file.live, &file.durable, BLOCK as usize, &revert);
        assert_eq!(mixed, expected, "seed {seed}: mixed {revert:?}");
        assert_eq!(
            apply(&file.live, &data.restore(&Fate::Kept, live_bytes)),
            file.live
        );
        assert!(apply(&file.live, &data.restore(&Fate::ZeroLength, live_bytes)).is_empty());
    }
}

#[test]
fn a_failed_sync_loses_the_data_for_good_but_not_later_writes() {
    let block = 4;
    let mut live = b"aaaabbbb".to_vec();
    let mut data = FileData::durable(8, block);
    data.before_write(0, 4, 8, &mut read_from(&live)).unwrap();
    live[0..4].copy_from_slice(b"AAAA");
    data.sync_failed();
    data.synced(8);
    assert!(data.writeback_lost());
    data.before_write(4, 4, 8, &mut read_from(&live)).unwrap();
    live[4..8].copy_from_slice(b"BBBB");
    data.synced(8);
    let restored = apply(&live, &data.restore(&Fate::Lost, 8));
    assert_eq!(
        restored, b"aaaaBBBB",
        "the failed block stays old, the later one is durable"
    );
}
