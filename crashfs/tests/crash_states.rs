//! Each crash state, produced on the real kernel interface: plain `std::fs` calls on
//! the mount, a power loss, and a look at what is left. Survival is random, so each
//! test loops over seeds and checks both that every state occurs and that what was
//! made durable always survives.

#![cfg(feature = "fuse")]

mod common;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;

use common::*;

const BLOCK: usize = 4096;

/// Three blocks, each filled with its own non-zero byte.
fn three_blocks() -> Vec<u8> {
    (0..3 * BLOCK).map(|i| b'a' + (i / BLOCK) as u8).collect()
}

#[test]
fn write_rename_without_fsync_then_power_loss_leaves_the_entry_missing_empty_zeroed_or_whole() {
    let Some(fx) = Fixture::new("write_rename_without_fsync", 1) else {
        return;
    };
    let d = fx.path("d");
    fs::create_dir(&d).unwrap();
    sync_dir(fx.mount.mountpoint()).unwrap();
    let data = three_blocks();
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    for seed in 0..120 {
        let (tmp, entry) = (d.join(format!("tmp{seed}")), d.join(format!("entry{seed}")));
        write_file(&tmp, &data, false).unwrap();
        fs::rename(&tmp, &entry).unwrap();
        fx.mount.power_loss_with_seed(seed).unwrap();
        let (old, new) = (contents(&tmp), contents(&entry));
        assert!(
            old.is_none() || new.is_none(),
            "seed {seed}: both names survived"
        );
        let state = match new.or(old.map(|_| Vec::from(&b"tmp"[..]))) {
            None => "missing",
            Some(bytes) if bytes == b"tmp" => "old name",
            Some(bytes) if bytes.is_empty() => "zero length",
            Some(bytes) if bytes == data => "whole",
            Some(bytes) => {
                assert_eq!(bytes.len(), data.len(), "seed {seed}: torn size");
                for (got, want) in bytes.chunks(BLOCK).zip(data.chunks(BLOCK)) {
                    assert!(
                        got == want || got.iter().all(|b| *b == 0),
                        "seed {seed}: a block neither new nor zero"
                    );
                }
                "zero-filled blocks"
            }
        };
        *seen.entry(state).or_default() += 1;
    }
    eprintln!("states over 120 power losses: {seen:?}");
    for state in [
        "missing",
        "old name",
        "zero length",
        "whole",
        "zero-filled blocks",
    ] {
        assert!(seen.contains_key(state), "{state} never occurred: {seen:?}");
    }
    let stats = fx.mount.stats();
    assert!(stats.zero_length_after_rename > 0, "{stats:?}");
    assert!(stats.crash_states.renames_kept_unsynced > 0, "{stats:?}");
    assert!(stats.blocks_reverted > 0, "{stats:?}");
}

#[test]
fn fsynced_file_and_directory_survive_whole_across_power_loss() {
    let Some(fx) = Fixture::new("fsynced_file_and_directory_survive", 2) else {
        return;
    };
    let d = fx.path("d");
    fs::create_dir(&d).unwrap();
    sync_dir(fx.mount.mountpoint()).unwrap();
    let data = three_blocks();
    let mut noise_lost = 0;
    for seed in 0..60 {
        let (tmp, entry) = (d.join(format!("tmp{seed}")), d.join(format!("entry{seed}")));
        write_file(&tmp, &data, true).unwrap();
        fs::rename(&tmp, &entry).unwrap();
        sync_dir(&d).unwrap();
        // Unsynced work after the persistence point must not take it down.
        write_file(&d.join(format!("noise{seed}")), b"noise", false).unwrap();
        fs::rename(&entry, d.join(format!("moved{seed}"))).unwrap();
        fx.mount.power_loss_with_seed(seed).unwrap();
        let here = contents(&entry);
        let moved = contents(&d.join(format!("moved{seed}")));
        assert_eq!(
            here.as_ref().or(moved.as_ref()),
            Some(&data),
            "seed {seed}: durable entry lost"
        );
        assert!(here.is_none() || moved.is_none(), "seed {seed}");
        if moved.is_some() {
            fs::rename(d.join(format!("moved{seed}")), &entry).unwrap();
            sync_dir(&d).unwrap();
        }
        noise_lost += u32::from(contents(&d.join(format!("noise{seed}"))).is_none());
        for earlier in 0..=seed {
            assert_eq!(
                contents(&d.join(format!("entry{earlier}"))),
                Some(data.clone()),
                "seed {seed}: entry{earlier}"
            );
        }
    }
    assert!(
        noise_lost > 0,
        "the unsynced noise always survived: nothing was at stake"
    );
}

#[test]
fn unsynced_unlink_can_come_back_and_a_synced_one_never_does() {
    let Some(fx) = Fixture::new("unsynced_unlink_can_come_back", 3) else {
        return;
    };
    let d = fx.path("d");
    fs::create_dir(&d).unwrap();
    sync_dir(fx.mount.mountpoint()).unwrap();
    let (mut back, mut gone) = (0, 0);
    for seed in 0..40 {
        let (x, y) = (d.join(format!("x{seed}")), d.join(format!("y{seed}")));
        write_file(&x, b"keep me", true).unwrap();
        write_file(&y, b"remove me", true).unwrap();
        sync_dir(&d).unwrap();
        fs::remove_file(&x).unwrap();
        fs::remove_file(&y).unwrap();
        sync_dir(&d).unwrap();
        write_file(&x, b"again", true).unwrap();
        sync_dir(&d).unwrap();
        fs::remove_file(&x).unwrap(); // not synced
        fx.mount.power_loss_with_seed(seed).unwrap();
        assert_eq!(contents(&y), None, "seed {seed}: a synced unlink came back");
        match contents(&x) {
            Some(bytes) => {
                assert_eq!(bytes, b"again", "seed {seed}");
                back += 1;
            }
            None => gone += 1,
        }
    }
    assert!(back > 0 && gone > 0, "came back {back}, stayed gone {gone}");
}

#[test]
fn rename_is_atomic_across_directories_across_power_loss() {
    let Some(fx) = Fixture::new("rename_is_atomic_across_directories", 4) else {
        return;
    };
    let (a, b) = (fx.path("a"), fx.path("b"));
    fs::create_dir(&a).unwrap();
    fs::create_dir(&b).unwrap();
    sync_dir(fx.mount.mountpoint()).unwrap();
    let data = three_blocks();
    let (mut old, mut new) = (0, 0);
    for seed in 0..40 {
        let name = format!("f{seed}");
        write_file(&a.join(&name), &data, true).unwrap();
        sync_dir(&a).unwrap();
        fs::rename(a.join(&name), b.join(&name)).unwrap();
        fx.mount.power_loss_with_seed(seed).unwrap();
        match (contents(&a.join(&name)), contents(&b.join(&name))) {
            (Some(bytes), None) => {
                assert_eq!(bytes, data);
                old += 1;
            }
            (None, Some(bytes)) => {
                assert_eq!(bytes, data);
                new += 1;
            }
            (here, there) => panic!(
                "seed {seed}: old name {:?}, new name {:?}",
                here.is_some(),
                there.is_some()
            ),
        }
    }
    assert!(old > 0 && new > 0, "old name {old}, new name {new}");
}

#[test]
fn failed_fsync_drops_the_data_for_good() {
    let Some(fx) = Fixture::new("failed_fsync_drops_the_data", 5) else {
        return;
    };
    for seed in 0..20 {
        let path = fx.path(&format!("f{seed}"));
        write_file(&path, b"old data", true).unwrap();
        sync_dir(fx.mount.mountpoint()).unwrap();
        let mut file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all(b"NEW DATA").unwrap();
        fx.mount
            .set_fault(
                crashfs::faults::OpKind::Fsync,
                crashfs::faults::Errno::EIO,
                1.0,
            )
            .unwrap();
        let failed = file.sync_data().expect_err("the injected fsync failure");
        assert_eq!(failed.raw_os_error(), Some(5), "{failed}");
        fx.mount.clear_faults();
        file.sync_data()
            .expect("a later fsync succeeds without the data");
        drop(file);
        assert_eq!(
            contents(&path).unwrap(),
            b"NEW DATA",
            "the page cache still shows it"
        );
        fx.mount.power_loss_with_seed(seed).unwrap();
        assert_eq!(
            contents(&path).unwrap(),
            b"old data",
            "seed {seed}: the failed data came back"
        );
    }
}

#[test]
fn a_directory_made_without_syncing_its_parent_can_vanish_with_its_synced_files() {
    let Some(fx) = Fixture::new("a_directory_made_without_syncing_its_parent", 6) else {
        return;
    };
    let (mut vanished, mut kept) = (0, 0);
    for seed in 0..40 {
        let d = fx.path(&format!("d{seed}"));
        fs::create_dir(&d).unwrap();
        write_file(&d.join("f"), b"synced", true).unwrap();
        sync_dir(&d).unwrap();
        fx.mount.power_loss_with_seed(seed).unwrap();
        if d.exists() {
            assert_eq!(contents(&d.join("f")).unwrap(), b"synced", "seed {seed}");
            kept += 1;
        } else {
            vanished += 1;
        }
    }
    assert!(vanished > 0 && kept > 0, "vanished {vanished}, kept {kept}");
    assert!(fx.mount.stats().crash_states.directories_lost > 0);
}

#[test]
fn overwrites_and_appends_come_back_lost_whole_empty_or_block_by_block() {
    let Some(fx) = Fixture::new("overwrites_and_appends", 7) else {
        return;
    };
    let old = vec![b'o'; 2 * BLOCK];
    let mut new = vec![b'n'; 2 * BLOCK];
    new.extend(vec![b'+'; BLOCK]);
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    for seed in 0..60 {
        let path = fx.path(&format!("f{seed}"));
        write_file(&path, &old, true).unwrap();
        sync_dir(fx.mount.mountpoint()).unwrap();
        let mut file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all(&new).unwrap();
        drop(file);
        fx.mount.power_loss_with_seed(seed).unwrap();
        let got = contents(&path).expect("the name is durable");
        let state = if got == old {
            "lost"
        } else if got == new {
            "kept"
        } else if got.is_empty() {
            "zero length"
        } else {
            assert_eq!(got.len(), new.len(), "seed {seed}");
            for (i, block) in got.chunks(BLOCK).enumerate() {
                let durable = if i < 2 { b'o' } else { 0 };
                assert!(
                    block.iter().all(|b| *b == new[i * BLOCK])
                        || block.iter().all(|b| *b == durable),
                    "seed {seed}: block {i} is neither new nor durable"
                );
            }
            "mixed"
        };
        *seen.entry(state).or_default() += 1;
    }
    eprintln!("states over 60 power losses: {seen:?}");
    assert_eq!(seen.len(), 4, "{seen:?}");
}

#[test]
fn handles_open_across_a_power_loss_fail_with_eio_and_new_ones_see_the_durable_state() {
    let Some(fx) = Fixture::new("handles_open_across_a_power_loss", 8) else {
        return;
    };
    let path = fx.path("f");
    write_file(&path, b"durable", true).unwrap();
    sync_dir(fx.mount.mountpoint()).unwrap();
    let ino = fs::metadata(&path).unwrap().ino();
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.write_all(b"lost?").unwrap();
    fx.mount.power_loss_with_seed(0).unwrap();
    assert_eq!(file.write(b"x").unwrap_err().raw_os_error(), Some(5));
    assert_eq!(file.sync_all().unwrap_err().raw_os_error(), Some(5));
    file.seek(SeekFrom::Start(0)).unwrap();
    assert_eq!(file.read(&mut [0; 8]).unwrap_err().raw_os_error(), Some(5));
    drop(file);
    let mut again = String::new();
    File::open(&path)
        .unwrap()
        .read_to_string(&mut again)
        .unwrap();
    assert!(
        again == "durable" || again == "lost?le" || again.is_empty(),
        "{again:?}"
    );
    assert_eq!(
        fs::metadata(&path).unwrap().ino(),
        ino,
        "a surviving inode keeps its number"
    );
    assert!(fx.mount.stats().stale_handles >= 1);
}

#[test]
fn a_backing_directory_with_files_is_served_and_counts_as_durable() {
    let options = crashfs::MountOptions::new(9);
    let Some(fx) = Fixture::with("a_backing_directory_with_files", options, |backing| {
        fs::create_dir_all(backing.join("d/e")).unwrap();
        fs::write(backing.join("d/e/f"), b"was here").unwrap();
    }) else {
        return;
    };
    assert_eq!(names(&fx.path("d")), ["e"]);
    for seed in 0..10 {
        fx.mount.power_loss_with_seed(seed).unwrap();
        assert_eq!(contents(&fx.path("d/e/f")).unwrap(), b"was here");
    }
    write_file(&fx.path("d/e/g"), b"new", true).unwrap();
    sync_dir(&fx.path("d/e")).unwrap();
    fx.mount.power_loss_with_seed(0).unwrap();
    assert_eq!(
        fs::read(fx.backing.join("d/e/g")).unwrap(),
        b"new",
        "the backing directory is the live view"
    );
    assert_eq!(
        names(&fx.backing),
        ["d"],
        "nothing of crashfs's own is left behind"
    );
}
