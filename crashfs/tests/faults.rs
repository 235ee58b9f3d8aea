//! Injected faults, seen by a plain `std::fs` caller on the mount: each operation
//! kind fails with the errno it was given, and the counts say so.

#![cfg(feature = "fuse")]

mod common;

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use common::*;
use crashfs::faults::{Errno, OpKind};

/// An operation kind, the errno to inject, and a plain caller's operation of that kind.
type Case<'a> = (OpKind, Errno, Box<dyn FnOnce() -> io::Result<()> + 'a>);

/// Runs `op` with every operation of `kind` failing with `errno`; returns its error.
fn failing(
    fx: &Fixture,
    kind: OpKind,
    errno: Errno,
    op: impl FnOnce() -> io::Result<()>,
) -> io::Error {
    fx.mount.set_fault(kind, errno, 1.0).unwrap();
    let result = op();
    fx.mount.clear_faults();
    result.expect_err(&format!("{kind} with {errno} injected succeeded"))
}

fn read_all(path: &Path) -> io::Result<()> {
    let mut data = Vec::new();
    File::open(path)?.read_to_end(&mut data).map(|_| ())
}

#[test]
fn each_fault_kind_reaches_a_plain_std_fs_caller_with_its_errno() {
    let Some(fx) = Fixture::new("each_fault_kind_reaches_a_plain_caller", 11) else {
        return;
    };
    let (d, f) = (fx.path("d"), fx.path("d/f"));
    fs::create_dir(&d).unwrap();
    write_file(&f, b"data", true).unwrap();
    let cases: Vec<Case> = vec![
        (
            OpKind::Create,
            Errno::ENOSPC,
            Box::new(|| write_file(&d.join("new"), b"x", false)),
        ),
        (
            OpKind::Mkdir,
            Errno::EDQUOT,
            Box::new(|| fs::create_dir(d.join("sub"))),
        ),
        (
            OpKind::Open,
            Errno::EIO,
            Box::new(|| File::open(&f).map(drop)),
        ),
        (OpKind::Read, Errno::EIO, Box::new(|| read_all(&f))),
        (
            OpKind::Write,
            Errno::ENOSPC,
            Box::new(|| {
                fs::OpenOptions::new()
                    .append(true)
                    .open(&f)?
                    .write_all(b"more")
            }),
        ),
        (
            OpKind::Fsync,
            Errno::EIO,
            Box::new(|| File::open(&f)?.sync_data()),
        ),
        (OpKind::Fsyncdir, Errno::EIO, Box::new(|| sync_dir(&d))),
        (
            OpKind::Rename,
            Errno::EROFS,
            Box::new(|| fs::rename(&f, d.join("g"))),
        ),
        (
            OpKind::Unlink,
            Errno::EROFS,
            Box::new(|| fs::remove_file(&f)),
        ),
        (
            OpKind::Readdir,
            Errno::EIO,
            Box::new(|| fs::read_dir(&d)?.try_for_each(|e| e.map(drop))),
        ),
        (
            OpKind::Setattr,
            Errno::EDQUOT,
            Box::new(|| fs::OpenOptions::new().write(true).open(&f)?.set_len(1)),
        ),
    ];
    for (kind, errno, op) in cases {
        let error = failing(&fx, kind, errno, op);
        assert_eq!(error.raw_os_error(), Some(errno.code()), "{kind}: {error}");
    }
    fs::create_dir(d.join("empty")).unwrap();
    let error = failing(&fx, OpKind::Rmdir, Errno::EROFS, || {
        fs::remove_dir(d.join("empty"))
    });
    assert_eq!(error.raw_os_error(), Some(Errno::EROFS.code()));
    // Nothing the refused operations were to do happened.
    assert_eq!(names(&d), ["empty", "f"]);
    assert_eq!(contents(&f).unwrap(), b"data");
    let injected = fx.mount.stats().faults_injected;
    assert_eq!(injected["create"]["ENOSPC"], 1);
    assert_eq!(injected["rmdir"]["EROFS"], 1);
    assert_eq!(injected.len(), 12, "{injected:?}");
}

#[test]
fn a_fault_probability_fails_about_that_share_and_zero_removes_the_rule() {
    let Some(fx) = Fixture::new("a_fault_probability_fails_about_that_share", 12) else {
        return;
    };
    let f = fx.path("f");
    write_file(&f, b"", true).unwrap();
    fx.mount.set_fault(OpKind::Write, Errno::EIO, 0.5).unwrap();
    let mut file = fs::OpenOptions::new().write(true).open(&f).unwrap();
    let failed = (0..200).filter(|_| file.write_all(b"x").is_err()).count();
    assert!((60..140).contains(&failed), "{failed} of 200 failed");
    fx.mount.set_fault(OpKind::Write, Errno::EIO, 0.0).unwrap();
    for _ in 0..50 {
        file.write_all(b"y").unwrap();
    }
    assert_eq!(fs::metadata(&f).unwrap().len(), 200 - failed as u64 + 50);
    assert!(fx.mount.set_fault(OpKind::Write, Errno::EIO, 2.0).is_err());
}

#[test]
fn a_failed_directory_sync_can_lose_an_entry_for_good() {
    let Some(fx) = Fixture::new("a_failed_directory_sync_can_lose_an_entry", 13) else {
        return;
    };
    let mut lost = 0;
    for seed in 0..30 {
        let d = fx.path(&format!("d{seed}"));
        fs::create_dir(&d).unwrap();
        sync_dir(fx.mount.mountpoint()).unwrap();
        write_file(&d.join("f"), b"data", true).unwrap();
        let error = failing(&fx, OpKind::Fsyncdir, Errno::EIO, || sync_dir(&d));
        assert_eq!(error.raw_os_error(), Some(5));
        assert_eq!(names(&d), ["f"], "still visible after the failure");
        sync_dir(&d).unwrap();
        fx.mount.power_loss_with_seed(seed).unwrap();
        lost += u32::from(contents(&d.join("f")).is_none());
    }
    assert!(lost > 0 && lost < 30, "lost {lost} of 30");
}
