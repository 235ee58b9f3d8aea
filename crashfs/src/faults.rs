//! Injected errors: per operation kind, an errno and a probability, drawn from a
//! seeded RNG, with a count of what was injected. No FUSE here: the file system asks
//! [`Faults::draw`] before each operation and fails it with the answer.
//!
//! The errors are those real disks give (`docs/crash-model.md`): EIO
//! (a bad sector, a failed write-back reported at fsync), ENOSPC and EDQUOT (a full
//! disk or quota, on create, write, rename, mkdir), EROFS (the file system remounted
//! read-only after journal errors).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// An operation a fault can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// open(2) of an existing file (`open`).
    Open,
    /// read(2) (`read`).
    Read,
    /// write(2) (`write`).
    Write,
    /// fsync/fdatasync of a file (`fsync`); the unsynced data is dropped for good.
    Fsync,
    /// fsync of a directory (`fsyncdir`); part of what it covered is dropped.
    Fsyncdir,
    /// Creating a file (`create`).
    Create,
    /// mkdir(2) (`mkdir`).
    Mkdir,
    /// rename(2) (`rename`).
    Rename,
    /// unlink(2) (`unlink`).
    Unlink,
    /// rmdir(2) (`rmdir`).
    Rmdir,
    /// Listing a directory (`readdir`).
    Readdir,
    /// truncate, chmod, utimes (`setattr`).
    Setattr,
}

impl OpKind {
    /// Every kind, in order.
    pub const ALL: [OpKind; 12] = [
        OpKind::Open,
        OpKind::Read,
        OpKind::Write,
        OpKind::Fsync,
        OpKind::Fsyncdir,
        OpKind::Create,
        OpKind::Mkdir,
        OpKind::Rename,
        OpKind::Unlink,
        OpKind::Rmdir,
        OpKind::Readdir,
        OpKind::Setattr,
    ];

    /// Its name in the control protocol.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Open => "open",
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Fsync => "fsync",
            OpKind::Fsyncdir => "fsyncdir",
            OpKind::Create => "create",
            OpKind::Mkdir => "mkdir",
            OpKind::Rename => "rename",
            OpKind::Unlink => "unlink",
            OpKind::Rmdir => "rmdir",
            OpKind::Readdir => "readdir",
            OpKind::Setattr => "setattr",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for OpKind {
    type Err = FaultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OpKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| FaultError::UnknownKind(s.to_string()))
    }
}

/// The errno an injected fault gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Errno {
    /// EIO: an I/O error.
    EIO,
    /// ENOSPC: no space left on device.
    ENOSPC,
    /// EDQUOT: disk quota exceeded.
    EDQUOT,
    /// EROFS: read-only file system.
    EROFS,
}

impl Errno {
    /// Every errno, in order.
    pub const ALL: [Errno; 4] = [Errno::EIO, Errno::ENOSPC, Errno::EDQUOT, Errno::EROFS];

    /// The Linux errno number.
    pub fn code(self) -> i32 {
        match self {
            Errno::EIO => 5,
            Errno::ENOSPC => 28,
            Errno::EDQUOT => 122,
            Errno::EROFS => 30,
        }
    }

    /// Its name (`EIO`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Errno::EIO => "EIO",
            Errno::ENOSPC => "ENOSPC",
            Errno::EDQUOT => "EDQUOT",
            Errno::EROFS => "EROFS",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Errno {
    type Err = FaultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Errno::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| FaultError::UnknownErrno(s.to_string()))
    }
}

/// A fault setting refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// Not an operation kind.
    #[error(
        "unknown operation kind {0:?} (one of open, read, write, fsync, fsyncdir, create, mkdir, rename, unlink, rmdir, readdir, setattr, all)"
    )]
    UnknownKind(String),
    /// Not an errno faults give.
    #[error("unknown errno {0:?} (one of EIO, ENOSPC, EDQUOT, EROFS)")]
    UnknownErrno(String),
    /// Not a probability.
    #[error("probability {0} is not within 0..=1")]
    BadProbability(f64),
}

/// The faults of one file system: a rule per kind, a seeded RNG, counts.
#[derive(Debug, Clone)]
pub struct Faults {
    rules: BTreeMap<OpKind, (Errno, f64)>,
    rng: ChaCha8Rng,
    injected: BTreeMap<(OpKind, Errno), u64>,
}

impl Faults {
    /// No rules yet; draws from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rules: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            injected: BTreeMap::new(),
        }
    }

    /// Operations of `kind` fail with `errno` with `probability` (0 removes the
    /// rule). A kind has one rule: a new one replaces the old.
    pub fn set(&mut self, kind: OpKind, errno: Errno, probability: f64) -> Result<(), FaultError> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(FaultError::BadProbability(probability));
        }
        if probability == 0.0 {
            self.rules.remove(&kind);
        } else {
            self.rules.insert(kind, (errno, probability));
        }
        Ok(())
    }

    /// Removes every rule (the counts stay).
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// Whether an operation of `kind` fails now, and with what; counts it. Draws
    /// only when `kind` has a rule.
    pub fn draw(&mut self, kind: OpKind) -> Option<Errno> {
        let (errno, probability) = *self.rules.get(&kind)?;
        if !self.rng.random_bool(probability) {
            return None;
        }
        *self.injected.entry((kind, errno)).or_default() += 1;
        Some(errno)
    }

    /// A fair coin from the faults' RNG (whether a failed rename happened anyway).
    pub fn coin(&mut self) -> bool {
        self.rng.random_bool(0.5)
    }

    /// The RNG (what a failed directory sync keeps).
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }

    /// Faults injected so far, by kind and errno (`"write"` -> `"EIO"` -> count).
    pub fn injected(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for ((kind, errno), n) in &self.injected {
            out.entry(kind.name().to_string())
                .or_default()
                .insert(errno.name().to_string(), *n);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_fails_about_its_share_of_operations_and_counts_them() {
        let mut faults = Faults::new(7);
        faults.set(OpKind::Write, Errno::ENOSPC, 0.25).unwrap();
        let failed = (0..4000)
            .filter(|_| faults.draw(OpKind::Write).is_some())
            .count();
        assert!((800..1200).contains(&failed), "{failed}");
        assert_eq!(faults.draw(OpKind::Read), None);
        assert_eq!(faults.injected()["write"]["ENOSPC"], failed as u64);
        faults.set(OpKind::Write, Errno::EIO, 1.0).unwrap();
        assert_eq!(faults.draw(OpKind::Write), Some(Errno::EIO));
        faults.clear();
        assert_eq!(faults.draw(OpKind::Write), None);
    }

    #[test]
    fn names_parse_back_and_bad_settings_are_refused() {
        for kind in OpKind::ALL {
            assert_eq!(kind.name().parse::<OpKind>(), Ok(kind));
        }
        for errno in Errno::ALL {
            assert_eq!(errno.name().parse::<Errno>(), Ok(errno));
        }
        assert!("eio".parse::<Errno>().is_ok());
        assert!("EAGAIN".parse::<Errno>().is_err());
        assert!("chmod".parse::<OpKind>().is_err());
        let mut faults = Faults::new(0);
        assert_eq!(
            faults.set(OpKind::Read, Errno::EIO, 1.5),
            Err(FaultError::BadProbability(1.5))
        );
    }
}
