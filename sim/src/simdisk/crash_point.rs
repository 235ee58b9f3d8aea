//! Where a disk loses power on purpose: the kinds of its primitive operations, the
//! crash points a scenario schedules, the count of operations of each kind, and which
//! point tripped.
//!
//! Two kinds of point. Just before the disk's k-th operation (`after_disk_ops`): a
//! power loss at a random place in whatever the spool was doing. Right after the n-th
//! operation of one kind (`after_disk_op` and `nth`): CrashMonkey's lesson (Mohan et
//! al., OSDI 2018) that the crash states which find bugs come right after the
//! operation whose loss matters, between a rename and the directory sync that makes
//! it durable, between a write and its fdatasync, inside a batch of removals, right
//! after a `mkdir`. A random k rarely lands there; an n-th rename always does.
//!
//! Counting draws nothing from the disk's RNG, so a scenario without crash points
//! runs exactly as before they existed.

use std::collections::VecDeque;

/// One kind of primitive operation of the simulated disk: each `spool::Disk` call is
/// one or more of these, and each can be a crash point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// Creating a directory (`create_dir_all`, once per missing directory).
    Mkdir,
    /// Creating a file (the first step of `create_synced`).
    Create,
    /// Writing a new file's data (its second step).
    Write,
    /// fdatasync of a file (its third step).
    SyncFile,
    /// Renaming a file.
    Rename,
    /// fsync of a directory.
    SyncDir,
    /// Removing a file.
    Unlink,
    /// Listing a directory.
    Readdir,
    /// Opening a file to read it (the first step of `read`).
    Open,
    /// Reading a file's data (its second step).
    Read,
    /// Taking the spool's lock.
    Lock,
}

impl OpKind {
    /// Every kind, in the order of [`OpKind`]'s variants.
    pub const ALL: [OpKind; 11] = [
        OpKind::Mkdir,
        OpKind::Create,
        OpKind::Write,
        OpKind::SyncFile,
        OpKind::Rename,
        OpKind::SyncDir,
        OpKind::Unlink,
        OpKind::Readdir,
        OpKind::Open,
        OpKind::Read,
        OpKind::Lock,
    ];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Mkdir => "mkdir",
            OpKind::Create => "create",
            OpKind::Write => "write",
            OpKind::SyncFile => "sync_file",
            OpKind::Rename => "rename",
            OpKind::SyncDir => "sync_dir",
            OpKind::Unlink => "unlink",
            OpKind::Readdir => "readdir",
            OpKind::Open => "open",
            OpKind::Read => "read",
            OpKind::Lock => "lock",
        }
    }

    /// The kind a scenario file names, if it names one.
    pub fn parse(name: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Every kind's name, for error messages: `mkdir, create, ...`.
    pub fn names() -> String {
        let names: Vec<&str> = OpKind::ALL.iter().map(|k| k.as_str()).collect();
        names.join(", ")
    }
}

/// Where a disk loses power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CrashPoint {
    /// Just before the disk's k-th operation (1-based, over its life).
    BeforeOp(u64),
    /// Just after the n-th operation of this kind (1-based, over the disk's life):
    /// the operation is done, the next one of any kind never happens.
    AfterNth(OpKind, u64),
}

/// A disk's crash points still to come, and its operations so far.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    /// Operations so far, over the disk's life.
    pub(super) ops: u64,
    /// Operations so far, per kind (indexed as [`OpKind::ALL`]).
    ops_by_kind: [u64; OpKind::ALL.len()],
    /// Operation counts before which power is lost, sorted.
    before_ops: VecDeque<u64>,
    /// `(kind, n)` after which power is lost, sorted.
    after_nth: Vec<(OpKind, u64)>,
    /// The point reached: the host is frozen until the world crashes it.
    pub(super) tripped: Option<CrashPoint>,
}

impl Schedule {
    /// Replaces the crash points still to come with `points`.
    pub(super) fn set(&mut self, points: &[CrashPoint]) {
        let mut before: Vec<u64> = Vec::new();
        self.after_nth.clear();
        for point in points {
            match *point {
                CrashPoint::BeforeOp(k) => before.push(k),
                CrashPoint::AfterNth(kind, n) => self.after_nth.push((kind, n)),
            }
        }
        before.sort_unstable();
        self.before_ops = before.into();
        self.after_nth.sort_unstable();
    }

    /// Forgets every crash point still to come.
    pub(super) fn clear(&mut self) {
        self.before_ops.clear();
        self.after_nth.clear();
    }

    /// Before an operation: counts it unless power is lost already, and trips when a
    /// point says power goes now. Returns whether the host is frozen.
    pub(super) fn before_op(&mut self) -> bool {
        if self.tripped.is_none() {
            self.ops += 1;
            if self.before_ops.front() == Some(&self.ops) {
                self.before_ops.pop_front();
                self.tripped = Some(CrashPoint::BeforeOp(self.ops));
            }
        }
        self.tripped.is_some()
    }

    /// After an operation of `kind` was done (whatever its result): counts it, and
    /// trips when it is a point's n-th.
    pub(super) fn after_op(&mut self, kind: OpKind) {
        let done = &mut self.ops_by_kind[kind as usize];
        *done += 1;
        let point = (kind, *done);
        if self.tripped.is_none()
            && let Some(i) = self.after_nth.iter().position(|&p| p == point)
        {
            self.after_nth.remove(i);
            self.tripped = Some(CrashPoint::AfterNth(kind, point.1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_from_its_own_name() {
        for kind in OpKind::ALL {
            assert_eq!(OpKind::parse(kind.as_str()), Some(kind));
            assert_eq!(OpKind::ALL[kind as usize], kind);
        }
        assert_eq!(OpKind::parse("fsync"), None);
    }

    #[test]
    fn a_point_after_the_nth_of_a_kind_trips_once_that_operation_is_done() {
        let mut s = Schedule::default();
        s.set(&[CrashPoint::AfterNth(OpKind::Rename, 2)]);
        for kind in [OpKind::Rename, OpKind::SyncDir, OpKind::Create] {
            assert!(!s.before_op());
            s.after_op(kind);
        }
        assert!(!s.before_op());
        s.after_op(OpKind::Rename);
        assert_eq!(s.tripped, Some(CrashPoint::AfterNth(OpKind::Rename, 2)));
        assert!(s.before_op(), "the next operation never happens");
        assert_eq!(s.ops, 4, "a frozen operation is not counted");
    }

    #[test]
    fn a_point_before_the_kth_operation_freezes_that_operation() {
        let mut s = Schedule::default();
        s.set(&[CrashPoint::BeforeOp(3), CrashPoint::BeforeOp(5)]);
        assert!(!s.before_op());
        assert!(!s.before_op());
        assert!(s.before_op());
        assert_eq!(s.tripped, Some(CrashPoint::BeforeOp(3)));
        s.tripped = None; // the power loss
        assert!(!s.before_op());
        assert!(s.before_op());
        assert_eq!(s.tripped, Some(CrashPoint::BeforeOp(5)));
    }
}
