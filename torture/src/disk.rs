//! crashfs in this process, through its library: mounted at `<work>/mnt` over
//! `<work>/backing`, power cut with a seed of the schedule's, unmounted and mounted
//! again; the crash states every power loss produced, summed over the mounts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use crashfs::Mount;
use crashfs::model::CrashStates;

/// What the power losses produced, over every mount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Produced {
    pub crash_states: CrashStates,
    pub zero_length_after_rename: u64,
    pub blocks_reverted: u64,
    pub stale_handles: u64,
}

/// The crash file system under the relay's spool.
#[derive(Debug)]
pub struct CrashDisk {
    mount: Option<Arc<Mount>>,
    pub mountpoint: PathBuf,
    pub backing: PathBuf,
    seed: u64,
    pub mounts: u64,
    pub produced: Produced,
}

impl CrashDisk {
    /// Mounts crashfs at `mountpoint` over `backing` (both must exist).
    pub async fn mount(mountpoint: &Path, backing: &Path, seed: u64) -> anyhow::Result<Self> {
        let mut disk = Self {
            mount: None,
            mountpoint: mountpoint.to_path_buf(),
            backing: backing.to_path_buf(),
            seed,
            mounts: 0,
            produced: Produced::default(),
        };
        disk.mount_again().await?;
        Ok(disk)
    }

    async fn mount_again(&mut self) -> anyhow::Result<()> {
        let (mountpoint, backing) = (self.mountpoint.clone(), self.backing.clone());
        let seed = self.seed.wrapping_add(self.mounts);
        let mount =
            tokio::task::spawn_blocking(move || crashfs::mount(&mountpoint, &backing, seed))
                .await?
                .with_context(|| {
                    format!("cannot mount crashfs at {}", self.mountpoint.display())
                })?;
        self.mount = Some(Arc::new(mount));
        self.mounts += 1;
        Ok(())
    }

    /// Cuts the power (every process using the mount must be dead), the decisions
    /// drawn from `seed`; returns once the mount serves the durable state, with
    /// what this power loss produced.
    pub async fn power_loss(&mut self, seed: u64) -> anyhow::Result<crashfs::PowerLoss> {
        let mount = self.mount.clone().context("crashfs is not mounted")?;
        let lost = tokio::task::spawn_blocking(move || mount.power_loss_with_seed(seed))
            .await?
            .context("crashfs power loss")?;
        let p = &mut self.produced;
        p.crash_states.add(&lost.crash_states);
        p.zero_length_after_rename += lost.zero_length_after_rename;
        p.blocks_reverted += lost.blocks_reverted;
        p.stale_handles += lost.stale_handles;
        Ok(lost)
    }

    /// Operations of `kind` fail with `errno` with `probability` from now on.
    pub fn set_fault(
        &self,
        kind: crashfs::faults::OpKind,
        errno: crashfs::faults::Errno,
        probability: f64,
    ) -> anyhow::Result<()> {
        let mount = self.mount.as_ref().context("crashfs is not mounted")?;
        mount
            .set_fault(kind, errno, probability)
            .context("crashfs fault")
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        if let Some(mount) = &self.mount {
            mount.clear_faults();
        }
    }

    /// The faults injected so far, by kind and errno, as JSON.
    pub fn faults_injected(&self) -> String {
        self.mount.as_ref().map_or(String::new(), |mount| {
            serde_json::to_string(&mount.stats().faults_injected).unwrap_or_default()
        })
    }

    /// Unmounts (nothing may use the mount) and mounts again over the same backing
    /// directory, whose contents are then the durable state.
    pub async fn remount(&mut self) -> anyhow::Result<()> {
        self.unmount().await?;
        self.mount_again().await
    }

    /// Unmounts.
    pub async fn unmount(&mut self) -> anyhow::Result<()> {
        let Some(mount) = self.mount.take() else {
            return Ok(());
        };
        let Ok(mount) = Arc::try_unwrap(mount) else {
            bail!("crashfs is still in use in this process");
        };
        tokio::task::spawn_blocking(move || mount.unmount())
            .await?
            .with_context(|| format!("cannot unmount {}", self.mountpoint.display()))
    }
}

/// Unmounts a crashfs left mounted at `mountpoint` by a run that died (`fusermount3
/// -u -z`), so that its directory can be emptied.
pub fn unmount_stale(mountpoint: &Path) -> anyhow::Result<()> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Ok(canonical) = std::path::absolute(mountpoint) else {
        return Ok(());
    };
    let target = canonical.to_string_lossy().to_string();
    let mounted = mounts
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(target.as_str()));
    if !mounted {
        return Ok(());
    }
    let status = std::process::Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(&canonical)
        .status()
        .context("cannot run fusermount3")?;
    if !status.success() {
        bail!("a crashfs is still mounted at {target} and fusermount3 -u -z failed");
    }
    Ok(())
}
