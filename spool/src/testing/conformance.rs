//! The contract every [`Disk`] implementation must keep, as checks: run against
//! [`StdDisk`](crate::StdDisk) and the test disks here, and against the simulated
//! disk in `sim`. Each function panics with a message naming the broken rule.

use std::io;
use std::path::{Path, PathBuf};

use crate::disk::{Contents, DirPlan, Disk, PrepareStep};

/// Runs every check in a fresh, empty directory `root` that `disk` can write to.
pub async fn run_all(disk: &dyn Disk, root: &Path) {
    create_list_read_remove(disk, &root.join("basic")).await;
    create_refuses_an_existing_file(disk, &root.join("exclusive")).await;
    rename_replaces_the_target(disk, &root.join("rename")).await;
    errors_name_missing_files(disk, &root.join("missing")).await;
    second_lock_is_refused_until_the_first_is_dropped(disk, &root.join("lock")).await;
    remove_all_answers_per_path_in_order(disk, &root.join("remove_all")).await;
    read_all_answers_per_path_in_order(disk, &root.join("read_all")).await;
    both_pieces_of_the_contents_are_written_in_order(disk, &root.join("pieces")).await;
    a_file_grows_by_appends_and_is_patched_in_place(disk, &root.join("stream")).await;
    ranges_read_what_lies_there_and_stop_at_the_end(disk, &root.join("ranges")).await;
    prepare_creates_locks_and_lists_in_one_call(disk, &root.join("prepare")).await;
}

/// A file written as its bytes arrive: `append` creates it and adds to its end,
/// `write_at` overwrites bytes inside it (never past the end), `sync_file` answers
/// for a file that exists and refuses one that does not.
pub async fn a_file_grows_by_appends_and_is_patched_in_place(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let path = dir.join("streamed");
    disk.append(&path, bytes::Bytes::from_static(b"....head"))
        .await
        .expect("append creates a missing file");
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    for piece in body.chunks(65_536) {
        disk.append(&path, bytes::Bytes::copy_from_slice(piece))
            .await
            .expect("append");
    }
    disk.write_at(&path, 0, bytes::Bytes::from_static(b"HEAD"))
        .await
        .expect("write_at inside the file");
    disk.sync_file(&path).await.expect("sync_file");
    let want = [&b"HEADhead"[..], &body[..]].concat();
    let read = disk.read(&path).await.unwrap();
    assert!(
        read == want,
        "appends must land in order, and write_at must overwrite in place: read {} bytes \
         starting {:?}, want {} starting {:?}",
        read.len(),
        &read[..read.len().min(12)],
        want.len(),
        &want[..12]
    );
    let len = want.len() as u64;
    let past = disk
        .write_at(&path, len - 2, bytes::Bytes::from_static(b"xyz"))
        .await;
    assert!(past.is_err(), "write_at past the end must fail");
    assert!(
        disk.read(&path).await.unwrap() == want,
        "a refused write_at changed the file"
    );
    let err = disk.sync_file(&dir.join("nothing")).await.unwrap_err();
    assert_eq!(
        err.kind(),
        io::ErrorKind::NotFound,
        "sync_file of a missing file"
    );
}

/// `read_range` gives the bytes at an offset, fewer at the end of the file, none
/// past it, and NotFound for a missing file.
pub async fn ranges_read_what_lies_there_and_stop_at_the_end(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let path = dir.join("f");
    disk.create_synced(&path, Contents::from(&b"0123456789"[..]))
        .await
        .unwrap();
    assert_eq!(disk.read_range(&path, 2, 3).await.unwrap(), b"234");
    assert_eq!(disk.read_range(&path, 8, 100).await.unwrap(), b"89");
    assert_eq!(disk.read_range(&path, 10, 5).await.unwrap(), b"");
    assert_eq!(disk.read_range(&path, 50, 5).await.unwrap(), b"");
    let err = disk
        .read_range(&dir.join("nothing"), 0, 1)
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        io::ErrorKind::NotFound,
        "read_range of a missing file"
    );
}

async fn fresh(disk: &dyn Disk, dir: &Path) {
    disk.create_dir_all(dir).await.expect("create_dir_all");
    disk.sync_dir(dir)
        .await
        .expect("sync_dir on a new directory");
}

/// Files written can be listed and read back; removed files disappear; directories
/// are not listed.
pub async fn create_list_read_remove(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    disk.create_dir_all(&dir.join("sub")).await.unwrap();
    disk.create_synced(&dir.join("a"), Contents::from(&b"alpha"[..]))
        .await
        .unwrap();
    disk.create_synced(&dir.join("b"), Contents::default())
        .await
        .unwrap();
    disk.sync_dir(dir).await.unwrap();
    let mut names = disk.list(dir).await.unwrap().to_vec();
    names.sort();
    assert_eq!(names, ["a", "b"], "list must show files and only files");
    assert_eq!(disk.read(&dir.join("a")).await.unwrap(), b"alpha");
    assert_eq!(disk.read(&dir.join("b")).await.unwrap(), b"");
    disk.remove(&dir.join("a")).await.unwrap();
    disk.sync_dir(dir).await.unwrap();
    assert_eq!(
        disk.list(dir).await.unwrap().to_vec(),
        ["b"],
        "removed file still listed"
    );
}

/// A file handed over as a head and a body holds the head, then the body, whether
/// created directly or through `write_and_rename`, and whichever piece is empty.
pub async fn both_pieces_of_the_contents_are_written_in_order(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let cases = [
        (&b"header"[..], &body[..]),
        (b"", &body[..]),
        (b"header", b""),
    ];
    for (i, (head, body)) in cases.into_iter().enumerate() {
        let contents = Contents::new(
            bytes::Bytes::copy_from_slice(head),
            bytes::Bytes::copy_from_slice(body),
        );
        let (direct, tmp, renamed) = (
            dir.join(format!("direct{i}")),
            dir.join(format!("tmp{i}")),
            dir.join(format!("renamed{i}")),
        );
        disk.create_synced(&direct, contents.clone()).await.unwrap();
        disk.write_and_rename(&tmp, &renamed, contents)
            .await
            .unwrap();
        let want = [head, body].concat();
        for path in [direct, renamed] {
            let got = disk.read(&path).await.unwrap();
            assert!(
                got == want,
                "{} holds {} bytes, not the {} + {} of its head and body in order",
                path.display(),
                got.len(),
                head.len(),
                body.len()
            );
        }
    }
}

/// `create_synced` never overwrites: the spool relies on it to never clobber an
/// entry.
pub async fn create_refuses_an_existing_file(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let path = dir.join("x");
    disk.create_synced(&path, Contents::from(&b"first"[..]))
        .await
        .unwrap();
    let err = disk
        .create_synced(&path, Contents::from(&b"second"[..]))
        .await
        .expect_err("create_synced overwrote an existing file");
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(disk.read(&path).await.unwrap(), b"first");
}

/// Rename moves contents and replaces an existing target.
pub async fn rename_replaces_the_target(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    disk.create_synced(&dir.join("from"), Contents::from(&b"new"[..]))
        .await
        .unwrap();
    disk.create_synced(&dir.join("to"), Contents::from(&b"old"[..]))
        .await
        .unwrap();
    disk.rename(&dir.join("from"), &dir.join("to"))
        .await
        .unwrap();
    disk.sync_dir(dir).await.unwrap();
    assert_eq!(disk.list(dir).await.unwrap().to_vec(), ["to"]);
    assert_eq!(disk.read(&dir.join("to")).await.unwrap(), b"new");
}

/// Operations on missing files fail with `NotFound`.
pub async fn errors_name_missing_files(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let missing = dir.join("missing");
    for (op, err) in [
        ("read", disk.read(&missing).await.map(drop).unwrap_err()),
        ("remove", disk.remove(&missing).await.unwrap_err()),
        (
            "rename",
            disk.rename(&missing, &dir.join("y")).await.unwrap_err(),
        ),
        ("list", disk.list(&missing).await.map(drop).unwrap_err()),
    ] {
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{op}: {err}");
    }
}

/// A second lock on the same path is refused while the first is held.
pub async fn second_lock_is_refused_until_the_first_is_dropped(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let path = dir.join("LOCK");
    let first = disk.lock(&path).await.expect("first lock");
    let err = disk.lock(&path).await.expect_err("second lock was granted");
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
    drop(first);
    disk.lock(&path).await.expect("lock after release");
}

/// `remove_all` of a large batch removes every file and answers one result per path,
/// in the order given, whatever order it removed them in: a missing file's
/// `NotFound` stays at its own place.
pub async fn remove_all_answers_per_path_in_order(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let paths: Vec<PathBuf> = (0..100).map(|i| dir.join(format!("f{i:03}"))).collect();
    for (i, path) in paths.iter().enumerate() {
        if i % 7 != 3 {
            disk.create_synced(path, Contents::from(vec![i as u8; 10]))
                .await
                .unwrap();
        }
    }
    let results = disk.remove_all(&paths).await.expect("remove_all");
    assert_eq!(results.len(), paths.len(), "one result per path");
    for (i, result) in results.iter().enumerate() {
        match result {
            Ok(()) => assert!(
                i % 7 != 3,
                "{}: removed a file never created",
                paths[i].display()
            ),
            Err(e) => assert!(
                i % 7 == 3 && e.kind() == std::io::ErrorKind::NotFound,
                "{}: {e}",
                paths[i].display()
            ),
        }
    }
    assert!(
        disk.list(dir).await.unwrap().is_empty(),
        "files left behind"
    );
}

/// `read_all` answers each path's whole contents at its own place, and a missing
/// file's `NotFound` at its place without failing the others.
pub async fn read_all_answers_per_path_in_order(disk: &dyn Disk, dir: &Path) {
    fresh(disk, dir).await;
    let paths: Vec<PathBuf> = (0..20).map(|i| dir.join(format!("f{i:02}"))).collect();
    for (i, path) in paths.iter().enumerate() {
        if i % 5 != 2 {
            let data = vec![i as u8; 100 * i + 1];
            disk.create_synced(path, Contents::from(data))
                .await
                .unwrap();
        }
    }
    let results = disk.read_all(&paths).await.expect("read_all");
    assert_eq!(results.len(), paths.len(), "one result per path");
    for (i, result) in results.iter().enumerate() {
        let path = paths[i].display();
        match result {
            Ok(data) => assert!(
                i % 5 != 2 && *data == vec![i as u8; 100 * i + 1],
                "{path}: read {} bytes that are not the file written there",
                data.len()
            ),
            Err(e) => assert!(
                i % 5 == 2 && e.kind() == io::ErrorKind::NotFound,
                "{path}: {e}"
            ),
        }
    }
}

/// `prepare` creates the directories asked for, takes the lock (a second `prepare`
/// of the same plan is refused at its `lock` step with `WouldBlock`, naming the lock
/// file) and answers one listing per directory, in the plan's order.
pub async fn prepare_creates_locks_and_lists_in_one_call(disk: &dyn Disk, dir: &Path) {
    let (one, two) = (dir.join("one"), dir.join("nested/two"));
    let plan = DirPlan {
        dir: dir.to_path_buf(),
        create: vec![one.clone(), two.clone()],
        lock: dir.join("LOCK"),
        list: vec![two.clone(), one.clone()],
    };
    let first = disk
        .prepare(&plan)
        .await
        .expect("prepare of a new directory");
    assert_eq!(first.listings.len(), 2, "one listing per directory");
    assert!(first.listings.iter().all(|names| names.is_empty()));
    disk.create_synced(&one.join("a"), Contents::from(&b"alpha"[..]))
        .await
        .unwrap();
    disk.sync_dir(&one).await.unwrap();
    let err = disk
        .prepare(&plan)
        .await
        .expect_err("a second lock was granted");
    assert_eq!(
        (err.step, &*err.path),
        (PrepareStep::Lock, &*plan.lock),
        "{}",
        err.source
    );
    assert_eq!(
        err.source.kind(),
        io::ErrorKind::WouldBlock,
        "{}",
        err.source
    );
    let message = err.to_string();
    assert!(
        message.starts_with("lock ") && message.contains("LOCK"),
        "{message}"
    );
    drop(first);
    let again = disk
        .prepare(&plan)
        .await
        .expect("prepare after the lock's release");
    let listed: Vec<Vec<String>> = (again.listings.iter())
        .map(|names| names.to_vec())
        .collect();
    assert_eq!(
        listed,
        [vec![], vec!["a".to_string()]],
        "listings in the plan's order"
    );
}
