//! What every test on the real kernel interface needs: a check that FUSE can be
//! used here (root, /dev/fuse, fusermount3), and a fresh mount over a fresh backing
//! directory.
//!
//! Without FUSE a test prints a notice and passes, unless `SPOOL_REQUIRE_FUSE=1`,
//! when it fails.

#![allow(dead_code)] // each test binary uses its own part

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crashfs::{Mount, MountOptions};

/// Why FUSE cannot be used here, if it cannot.
fn fuse_missing() -> Option<String> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?");
    if euid != "0" {
        return Some(format!("not root (effective uid {euid})"));
    }
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("/dev/fuse: {e}"));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|dir| dir.join("fusermount3").is_file()) {
        return Some("fusermount3 is not on PATH (Debian's fuse3 package)".to_string());
    }
    None
}

/// Whether the test can run; panics when FUSE is required and missing.
pub fn fuse_available(test: &str) -> bool {
    let Some(why) = fuse_missing() else {
        return true;
    };
    if std::env::var("SPOOL_REQUIRE_FUSE").as_deref() == Ok("1") {
        panic!("{test}: SPOOL_REQUIRE_FUSE=1 but FUSE cannot be used: {why}");
    }
    eprintln!(
        "{test}: skipped, FUSE cannot be used here: {why} (SPOOL_REQUIRE_FUSE=1 makes this fail)"
    );
    false
}

/// A mount over a fresh backing directory, both in one temporary directory.
pub struct Fixture {
    pub mount: Mount,
    pub backing: PathBuf,
    // Dropped after the mount (fields drop in order).
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// Mounts a fresh crashfs with `seed`, or `None` when FUSE cannot be used.
    pub fn new(test: &str, seed: u64) -> Option<Self> {
        Self::with(test, MountOptions::new(seed), |_| {})
    }

    /// Like [`Self::new`], with options and a backing directory prepared first.
    pub fn with(test: &str, options: MountOptions, prepare: impl FnOnce(&Path)) -> Option<Self> {
        if !fuse_available(test) {
            return None;
        }
        let dir = tempfile::tempdir().expect("temporary directory");
        let backing = dir.path().join("backing");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&backing).unwrap();
        fs::create_dir(&mnt).unwrap();
        prepare(&backing);
        let mount = crashfs::mount_with(&mnt, &backing, &options).expect("mount crashfs");
        Some(Self {
            mount,
            backing,
            _dir: dir,
        })
    }

    /// A path on the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount.mountpoint().join(rel)
    }
}

/// Creates `path` with `data`; fdatasyncs it when `sync`.
pub fn write_file(path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
    let mut file = File::create_new(path)?;
    file.write_all(data)?;
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

/// fsync of a directory.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// The contents of `path`, or `None` when it does not exist.
pub fn contents(path: &Path) -> Option<Vec<u8>> {
    match File::open(path) {
        Ok(mut f) => {
            let mut data = Vec::new();
            f.read_to_end(&mut data).expect("read a surviving file");
            Some(data)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => panic!("open {}: {e}", path.display()),
    }
}

/// Sorted names in `dir`.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A runtime for the tests that drive the spool on the mount.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
