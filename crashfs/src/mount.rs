//! The library's handle on a mounted crashfs: mount, lose power, inject faults, read
//! the counts, unmount (also on drop). What the binary and its control socket do
//! goes through here, so a Rust test harness can do the same without the socket.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::Error;
use crate::faults::{Errno, OpKind};
use crate::fuse::CrashFs;
use crate::fuse::backing::{Backing, ImportError};
use crate::fuse::state::State;
use crate::stats::{PowerLoss, Stats};

/// Tears of unsynced data happen in blocks of this many bytes unless told
/// otherwise (a page, and ext4's usual block).
pub const DEFAULT_BLOCK_BYTES: u64 = 4096;

/// How to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Decides every power loss given no seed of its own, and every fault.
    pub seed: u64,
    /// Granularity of what unsynced data survives, in bytes (default 4096).
    pub block_bytes: u64,
    /// Let users other than the one mounting use the file system (`allow_other`;
    /// as a non-root user this needs `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
}

impl MountOptions {
    /// The defaults, with `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            block_bytes: DEFAULT_BLOCK_BYTES,
            allow_other: false,
        }
    }
}

/// A mounted crashfs; unmounted when dropped.
#[derive(Debug)]
pub struct Mount {
    state: Arc<Mutex<State>>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

/// Mounts crashfs at `mountpoint`, serving `backing` (whose contents count as
/// durable), with the default options and `seed`.
pub fn mount(mountpoint: &Path, backing: &Path, seed: u64) -> Result<Mount, Error> {
    mount_with(mountpoint, backing, &MountOptions::new(seed))
}

/// The FUSE configuration: see the crate documentation for why each option.
fn fuse_config(options: &MountOptions) -> fuser::Config {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("crashfs".to_string()),
        fuser::MountOption::Subtype("crashfs".to_string()),
        fuser::MountOption::DefaultPermissions,
    ];
    if options.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    config
}

/// Mounts crashfs at `mountpoint`, serving `backing`.
pub fn mount_with(
    mountpoint: &Path,
    backing: &Path,
    options: &MountOptions,
) -> Result<Mount, Error> {
    let backing_root = backing.canonicalize().map_err(|source| Error::Backing {
        path: backing.to_path_buf(),
        source,
    })?;
    let mount_root = mountpoint.canonicalize().map_err(|source| Error::Mount {
        path: mountpoint.to_path_buf(),
        source,
    })?;
    if mount_root.starts_with(&backing_root) || backing_root.starts_with(&mount_root) {
        return Err(Error::Nested {
            mountpoint: mount_root,
            backing: backing_root,
        });
    }
    let block_bytes = options.block_bytes.max(1);
    let store = Backing::new(backing_root);
    let (ns, files) = store.import(block_bytes).map_err(|e| match e {
        ImportError::Io(path, source) => Error::Backing { path, source },
        ImportError::Unsupported(path, what) => Error::Unsupported { path, what },
    })?;
    let state = State::new(
        ns,
        files.into_iter().collect(),
        store,
        options.seed,
        block_bytes,
    );
    let state = Arc::new(Mutex::new(state));
    let fs = CrashFs::new(state.clone());
    let session = fuser::spawn_mount(fs, &mount_root, &fuse_config(options)).map_err(|source| {
        Error::Mount {
            path: mount_root.clone(),
            source,
        }
    })?;
    Ok(Mount {
        state,
        session: Some(session),
        mountpoint: mount_root,
    })
}

impl Mount {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where it is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The backing directory.
    pub fn backing(&self) -> PathBuf {
        self.lock().backing.root().to_path_buf()
    }

    /// Loses power, the decisions drawn from the mount's seeded RNG; returns once
    /// the file system serves the durable state. Kill the processes using the mount
    /// first: one still running would keep writing through the cut.
    pub fn power_loss(&self) -> Result<PowerLoss, Error> {
        let mut state = self.lock();
        let mut rng = state.rng.clone();
        let result = state.power_loss(&mut rng);
        state.rng = rng;
        result.map_err(Error::PowerLoss)
    }

    /// Loses power, the decisions drawn from `seed` alone.
    pub fn power_loss_with_seed(&self, seed: u64) -> Result<PowerLoss, Error> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        self.lock().power_loss(&mut rng).map_err(Error::PowerLoss)
    }

    /// Operations of `kind` fail with `errno` with `probability` from now on (0
    /// removes the rule; a new rule for a kind replaces the old).
    pub fn set_fault(&self, kind: OpKind, errno: Errno, probability: f64) -> Result<(), Error> {
        Ok(self.lock().faults.set(kind, errno, probability)?)
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        let state = self.lock();
        let mut stats = state.stats.clone();
        stats.faults_injected = state.faults.injected();
        stats.pending_namespace_ops = state.ns.pending_ops() as u64;
        stats.dirty_files = state.dirty_files() as u64;
        stats
    }

    /// Whether the session still runs (false once unmounted from outside, e.g.
    /// `fusermount3 -u`).
    pub fn is_mounted(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Unmounts and waits for the session to end.
    pub fn unmount(mut self) -> Result<(), Error> {
        self.unmount_inner()
    }

    fn unmount_inner(&mut self) -> Result<(), Error> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        session.umount_and_join().map_err(|source| Error::Unmount {
            path: self.mountpoint.clone(),
            source,
        })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_inner() {
            eprintln!("crashfs: {e}");
        }
    }
}
