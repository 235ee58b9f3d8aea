//! The namespace model: what every directory holds now (live) and what a power loss
//! keeps (durable), keyed by inode, so that directories can be renamed.
//!
//! The same rules as the simulated disk's (`sim/src/simdisk/fs.rs`), which keys
//! directories by path and has no `rmdir` or directory rename:
//!
//! - a directory has a durable name map and an overlay: the live value of every name
//!   changed by a namespace operation (create, mkdir, rename, unlink, rmdir) not yet
//!   durable; those operations wait in one journal, in issue order;
//! - syncing a directory makes durable every journal operation touching it and every
//!   earlier one touching a directory those touch, so that each directory's durable
//!   map is always a prefix of its history;
//! - a failed directory sync keeps a random prefix of those operations and drops the
//!   rest for good (they stay visible until the power goes);
//! - a power loss keeps a random prefix per directory ([`super::fate::keep_in_order`]);
//!   directories not reachable from the root through durable entries vanish with
//!   their contents; then the live view is the durable one.
//!
//! Files have at most one name (no hard links). Inode numbers are never reused.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use rand::Rng;

use super::fate::{self, CrashStates};

/// An inode number.
pub type Ino = u64;

/// The root directory's inode (FUSE's root).
pub const ROOT: Ino = 1;

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// Why a namespace operation was refused (each is the errno a file system gives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NamespaceError {
    /// ENOENT.
    #[error("no such file or directory")]
    NotFound,
    /// EEXIST.
    #[error("file exists")]
    Exists,
    /// ENOTDIR.
    #[error("not a directory")]
    NotDir,
    /// EISDIR.
    #[error("is a directory")]
    IsDir,
    /// ENOTEMPTY.
    #[error("directory not empty")]
    NotEmpty,
    /// EINVAL: a directory moved into itself.
    #[error("invalid argument")]
    Invalid,
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    /// Its live name (none once removed).
    live: Option<(Ino, OsString)>,
    durable_links: u32,
    /// Journal operations that link this inode somewhere.
    journal_refs: u32,
    /// Its durable name was last set by a rename.
    renamed: bool,
}

#[derive(Debug, Default)]
struct Dir {
    durable: BTreeMap<OsString, Ino>,
    /// Live value of every name changed by a journal operation.
    overlay: BTreeMap<OsString, Option<Ino>>,
}

#[derive(Debug, Clone)]
struct Change {
    dir: Ino,
    name: OsString,
    node: Option<Ino>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpState {
    Pending,
    /// A failed sync dropped it: visible until the power goes, never durable.
    Dropped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Create,
    Rename,
    Remove,
}

#[derive(Debug, Clone)]
struct Op {
    id: u64,
    changes: Vec<Change>,
    state: OpState,
    kind: OpKind,
}

impl Op {
    fn touches(&self, dir: Ino) -> bool {
        self.changes.iter().any(|c| c.dir == dir)
    }
}

/// The namespace of one file system.
#[derive(Debug)]
pub struct Namespace {
    nodes: BTreeMap<Ino, Node>,
    dirs: BTreeMap<Ino, Dir>,
    journal: Vec<Op>,
    next_ino: Ino,
    next_op: u64,
    maybe_unused: Vec<Ino>,
    freed: Vec<Ino>,
}

impl Default for Namespace {
    fn default() -> Self {
        Self::new()
    }
}

impl Namespace {
    /// A namespace holding only the root directory (durable).
    pub fn new() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            ROOT,
            Node {
                kind: Kind::Dir,
                live: None,
                durable_links: 1,
                journal_refs: 0,
                renamed: false,
            },
        );
        let mut dirs = BTreeMap::new();
        dirs.insert(ROOT, Dir::default());
        Self {
            nodes,
            dirs,
            journal: Vec::new(),
            next_ino: ROOT + 1,
            next_op: 0,
            maybe_unused: Vec::new(),
            freed: Vec::new(),
        }
    }

    fn new_node(&mut self, kind: Kind) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                kind,
                live: None,
                durable_links: 0,
                journal_refs: 0,
                renamed: false,
            },
        );
        if kind == Kind::Dir {
            self.dirs.insert(ino, Dir::default());
        }
        ino
    }

    /// Adds an entry that is durable already (a file system that existed before
    /// the mount).
    pub fn add_durable(
        &mut self,
        parent: Ino,
        name: &OsStr,
        kind: Kind,
    ) -> Result<Ino, NamespaceError> {
        self.check_create(parent, name)?;
        let ino = self.new_node(kind);
        let node = self.nodes.get_mut(&ino).expect("just made");
        node.live = Some((parent, name.to_owned()));
        node.durable_links = 1;
        self.dirs
            .get_mut(&parent)
            .expect("checked")
            .durable
            .insert(name.to_owned(), ino);
        Ok(ino)
    }

    fn live_entry(&self, dir: Ino, name: &OsStr) -> Option<Ino> {
        let d = self.dirs.get(&dir)?;
        match d.overlay.get(name) {
            Some(node) => *node,
            None => d.durable.get(name).copied(),
        }
    }

    fn live_dir(&self, dir: Ino) -> Result<&Dir, NamespaceError> {
        match self.nodes.get(&dir) {
            None => Err(NamespaceError::NotFound),
            Some(n) if n.kind != Kind::Dir => Err(NamespaceError::NotDir),
            Some(n) if dir != ROOT && n.live.is_none() => Err(NamespaceError::NotFound),
            Some(_) => self.dirs.get(&dir).ok_or(NamespaceError::NotFound),
        }
    }

    /// Whether [`Self::create`] of `name` in `parent` would succeed.
    pub fn check_create(&self, parent: Ino, name: &OsStr) -> Result<(), NamespaceError> {
        self.live_dir(parent)?;
        match self.live_entry(parent, name) {
            Some(_) => Err(NamespaceError::Exists),
            None => Ok(()),
        }
    }

    /// The inode `name` in `parent` names now.
    pub fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Ino, NamespaceError> {
        self.live_dir(parent)?;
        self.live_entry(parent, name)
            .ok_or(NamespaceError::NotFound)
    }

    /// What `ino` is, if the namespace still knows it.
    pub fn kind(&self, ino: Ino) -> Option<Kind> {
        self.nodes.get(&ino).map(|n| n.kind)
    }

    /// Whether `ino` has a live name (the root always has).
    pub fn is_linked(&self, ino: Ino) -> bool {
        ino == ROOT || self.nodes.get(&ino).is_some_and(|n| n.live.is_some())
    }

    /// The live parent of `ino` (the root is its own parent).
    pub fn parent(&self, ino: Ino) -> Option<Ino> {
        if ino == ROOT {
            return Some(ROOT);
        }
        self.nodes.get(&ino)?.live.as_ref().map(|(p, _)| *p)
    }

    /// The live path of `ino` relative to the root (empty for the root), or `None`
    /// when it has no live name.
    pub fn path(&self, ino: Ino) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let (parent, name) = self.nodes.get(&at)?.live.as_ref()?;
            names.push(name.as_os_str());
            at = *parent;
            if names.len() > self.nodes.len() {
                return None; // a cycle: cannot happen in a live tree
            }
        }
        Some(names.iter().rev().collect())
    }

    /// The live entries of `dir`, sorted by name.
    pub fn list(&self, dir: Ino) -> Result<Vec<(OsString, Ino)>, NamespaceError> {
        let d = self.live_dir(dir)?;
        let mut entries: BTreeMap<&OsStr, Ino> = d
            .durable
            .iter()
            .filter(|(name, _)| !d.overlay.contains_key(*name))
            .map(|(name, ino)| (name.as_os_str(), *ino))
            .collect();
        for (name, node) in &d.overlay {
            if let Some(ino) = node {
                entries.insert(name, *ino);
            }
        }
        Ok(entries
            .into_iter()
            .map(|(n, i)| (n.to_owned(), i))
            .collect())
    }

    /// Namespace operations waiting for a directory sync.
    pub fn pending_ops(&self) -> usize {
        self.journal
            .iter()
            .filter(|op| op.state == OpState::Pending)
            .count()
    }

    /// Every inode the namespace knows, with its kind.
    pub fn inodes(&self) -> Vec<(Ino, Kind)> {
        self.nodes.iter().map(|(i, n)| (*i, n.kind)).collect()
    }

    /// Whether the durable name of `ino` was last set by a rename.
    pub fn renamed(&self, ino: Ino) -> bool {
        self.nodes.get(&ino).is_some_and(|n| n.renamed)
    }

    /// Inodes that no name and no pending operation refers to any more, since the
    /// last call: their storage can go once nothing holds them open.
    pub fn take_freed(&mut self) -> Vec<Ino> {
        std::mem::take(&mut self.freed)
    }

    /// Creates an empty file or directory `name` in `parent`.
    pub fn create(&mut self, parent: Ino, name: &OsStr, kind: Kind) -> Result<Ino, NamespaceError> {
        self.check_create(parent, name)?;
        let ino = self.new_node(kind);
        self.issue(
            vec![Change {
                dir: parent,
                name: name.to_owned(),
                node: Some(ino),
            }],
            OpKind::Create,
        );
        Ok(ino)
    }

    /// What [`Self::remove`] would remove, or why it would refuse.
    pub fn check_remove(
        &self,
        parent: Ino,
        name: &OsStr,
        kind: Kind,
    ) -> Result<Ino, NamespaceError> {
        let ino = self.lookup(parent, name)?;
        match (kind, self.kind(ino)) {
            (Kind::File, Some(Kind::Dir)) => Err(NamespaceError::IsDir),
            (Kind::Dir, Some(Kind::File)) => Err(NamespaceError::NotDir),
            (Kind::Dir, _) if !self.list(ino)?.is_empty() => Err(NamespaceError::NotEmpty),
            _ => Ok(ino),
        }
    }

    /// Removes the name `name` from `parent`: a file (`Kind::File`, unlink) or an
    /// empty directory (`Kind::Dir`, rmdir). Returns the inode it named.
    pub fn remove(&mut self, parent: Ino, name: &OsStr, kind: Kind) -> Result<Ino, NamespaceError> {
        let ino = self.check_remove(parent, name, kind)?;
        self.issue(
            vec![Change {
                dir: parent,
                name: name.to_owned(),
                node: None,
            }],
            OpKind::Remove,
        );
        Ok(ino)
    }

    /// What [`Self::rename`] would move and replace (`(moved, replaced)`; replaced
    /// is the moved inode itself when both names are links to it), or why it would
    /// refuse.
    pub fn check_rename(
        &self,
        from: Ino,
        from_name: &OsStr,
        to: Ino,
        to_name: &OsStr,
    ) -> Result<(Ino, Option<Ino>), NamespaceError> {
        let ino = self.lookup(from, from_name)?;
        self.live_dir(to)?;
        let kind = self.kind(ino).ok_or(NamespaceError::NotFound)?;
        let target = self.live_entry(to, to_name);
        if target == Some(ino) {
            return Ok((ino, target));
        }
        if let Some(t) = target {
            match (kind, self.kind(t)) {
                (Kind::File, Some(Kind::Dir)) => return Err(NamespaceError::IsDir),
                (Kind::Dir, Some(Kind::File)) => return Err(NamespaceError::NotDir),
                (Kind::Dir, _) if !self.list(t)?.is_empty() => {
                    return Err(NamespaceError::NotEmpty);
                }
                _ => {}
            }
        }
        if kind == Kind::Dir && self.is_within(to, ino) {
            return Err(NamespaceError::Invalid);
        }
        Ok((ino, target))
    }

    /// Renames `from_name` in `from` to `to_name` in `to`, replacing a file there (or
    /// an empty directory, when a directory moves). Returns the inode replaced.
    pub fn rename(
        &mut self,
        from: Ino,
        from_name: &OsStr,
        to: Ino,
        to_name: &OsStr,
    ) -> Result<Option<Ino>, NamespaceError> {
        let (ino, target) = self.check_rename(from, from_name, to, to_name)?;
        if target == Some(ino) {
            return Ok(None);
        }
        let changes = vec![
            Change {
                dir: from,
                name: from_name.to_owned(),
                node: None,
            },
            Change {
                dir: to,
                name: to_name.to_owned(),
                node: Some(ino),
            },
        ];
        self.issue(changes, OpKind::Rename);
        Ok(target)
    }

    /// Whether `dir` is `ancestor` or lies (live) below it.
    fn is_within(&self, dir: Ino, ancestor: Ino) -> bool {
        let mut at = dir;
        for _ in 0..=self.nodes.len() {
            if at == ancestor {
                return true;
            }
            match self.parent(at) {
                Some(p) if p != at => at = p,
                _ => return false,
            }
        }
        false
    }

    fn issue(&mut self, changes: Vec<Change>, kind: OpKind) {
        for c in &changes {
            if let Some(old) = self.live_entry(c.dir, &c.name) {
                let node = self.nodes.get_mut(&old).expect("linked inode");
                node.live = None;
                self.maybe_unused.push(old);
            }
            if let Some(ino) = c.node {
                let node = self.nodes.get_mut(&ino).expect("linked inode");
                node.live = Some((c.dir, c.name.clone()));
                node.journal_refs += 1;
            }
            self.dirs
                .get_mut(&c.dir)
                .expect("changes are issued in live directories")
                .overlay
                .insert(c.name.clone(), c.node);
        }
        self.next_op += 1;
        self.journal.push(Op {
            id: self.next_op,
            changes,
            state: OpState::Pending,
            kind,
        });
        self.collect_garbage();
    }

    /// The journal operations a sync of `dir` makes durable, in journal order: those
    /// touching `dir`, and every earlier one touching a directory they touch.
    fn sync_set(&self, dir: Ino) -> Vec<usize> {
        let pending: Vec<usize> = (0..self.journal.len())
            .filter(|&i| self.journal[i].state == OpState::Pending)
            .collect();
        let mut chosen: BTreeSet<usize> = pending
            .iter()
            .copied()
            .filter(|&i| self.journal[i].touches(dir))
            .collect();
        loop {
            // For each directory touched by a chosen op, the latest chosen op there.
            let mut latest: BTreeMap<Ino, usize> = BTreeMap::new();
            for &i in &chosen {
                for c in &self.journal[i].changes {
                    let entry = latest.entry(c.dir).or_insert(i);
                    *entry = (*entry).max(i);
                }
            }
            let before = chosen.len();
            for &i in &pending {
                if !chosen.contains(&i)
                    && self.journal[i]
                        .changes
                        .iter()
                        .any(|c| latest.get(&c.dir).is_some_and(|&m| i < m))
                {
                    chosen.insert(i);
                }
            }
            if chosen.len() == before {
                return chosen.into_iter().collect();
            }
        }
    }

    /// Syncs `dir` (fsync of a directory). With `fail`, a random prefix of what it
    /// would make durable becomes durable and the rest is dropped for good (an fsync
    /// that returned an error). A directory the namespace no longer knows has
    /// nothing to sync.
    pub fn sync_dir<R: Rng + ?Sized>(&mut self, dir: Ino, fail: Option<&mut R>) {
        if !self.dirs.contains_key(&dir) {
            return;
        }
        let set = self.sync_set(dir);
        let keep = match fail {
            None => set.len(),
            Some(rng) => fate::failed_sync_keeps(rng, set.len()),
        };
        let (kept, dropped) = set.split_at(keep);
        for &i in dropped {
            self.journal[i].state = OpState::Dropped;
        }
        let kept: BTreeSet<usize> = kept.iter().copied().collect();
        self.make_durable(&kept);
    }

    /// Applies the journal operations at `indices` to the durable namespace and
    /// removes them from the journal. A name leaves the overlay only when the last
    /// operation on it is now durable.
    fn make_durable(&mut self, indices: &BTreeSet<usize>) {
        if indices.is_empty() {
            return;
        }
        let mut touched: BTreeMap<(Ino, OsString), u64> = BTreeMap::new();
        let journal = std::mem::take(&mut self.journal);
        for (i, op) in journal.into_iter().enumerate() {
            if indices.contains(&i) {
                for c in &op.changes {
                    touched.insert((c.dir, c.name.clone()), op.id);
                }
                self.apply_durable(&op);
            } else {
                self.journal.push(op);
            }
        }
        for ((dir, name), applied) in touched {
            let later = self.journal.iter().any(|op| {
                op.id > applied && op.changes.iter().any(|c| c.dir == dir && c.name == name)
            });
            if !later && let Some(d) = self.dirs.get_mut(&dir) {
                d.overlay.remove(&name);
            }
        }
        self.collect_garbage();
    }

    fn apply_durable(&mut self, op: &Op) {
        for c in &op.changes {
            if let Some(ino) = c.node {
                let node = self.nodes.get_mut(&ino).expect("referenced inode");
                node.journal_refs -= 1;
                self.maybe_unused.push(ino);
            }
            let Some(dir) = self.dirs.get_mut(&c.dir) else {
                continue; // the directory itself is gone
            };
            let old = match c.node {
                Some(ino) => dir.durable.insert(c.name.clone(), ino),
                None => dir.durable.remove(&c.name),
            };
            if let Some(old) = old {
                self.nodes.get_mut(&old).expect("inode").durable_links -= 1;
                self.maybe_unused.push(old);
            }
            if let Some(ino) = c.node {
                let node = self.nodes.get_mut(&ino).expect("inode");
                node.durable_links += 1;
                node.renamed = op.kind == OpKind::Rename;
            }
        }
    }

    fn release_journal_refs(&mut self, op: &Op) {
        for c in &op.changes {
            if let Some(ino) = c.node {
                self.nodes.get_mut(&ino).expect("inode").journal_refs -= 1;
                self.maybe_unused.push(ino);
            }
        }
    }

    /// Frees the inodes in `maybe_unused` that no name or journal operation refers
    /// to any more (a directory only once nothing in it does either).
    fn collect_garbage(&mut self) {
        for ino in std::mem::take(&mut self.maybe_unused) {
            let Some(node) = self.nodes.get(&ino) else {
                continue;
            };
            let unused = ino != ROOT
                && node.live.is_none()
                && node.durable_links == 0
                && node.journal_refs == 0
                && self
                    .dirs
                    .get(&ino)
                    .is_none_or(|d| d.durable.is_empty() && d.overlay.is_empty());
            if unused {
                self.nodes.remove(&ino);
                self.dirs.remove(&ino);
                self.freed.push(ino);
            }
        }
    }

    /// Power loss: decides which pending operations survive, drops the directories
    /// no longer reachable from the root, and makes the durable view the live one.
    /// Counts what it produced into `states`.
    pub fn power_loss<R: Rng + ?Sized>(&mut self, rng: &mut R, states: &mut CrashStates) {
        self.settle_journal(rng, states);
        self.remove_unreachable(states);
        for node in self.nodes.values_mut() {
            node.live = None;
            node.journal_refs = 0;
        }
        let links: Vec<(Ino, Ino, OsString)> = self
            .dirs
            .iter()
            .flat_map(|(dir, d)| {
                d.durable
                    .iter()
                    .map(move |(name, ino)| (*dir, *ino, name.clone()))
            })
            .collect();
        for (dir, ino, name) in links {
            self.nodes.get_mut(&ino).expect("linked").live = Some((dir, name));
        }
        let gone: Vec<Ino> = self
            .nodes
            .iter()
            .filter(|(ino, n)| **ino != ROOT && n.durable_links == 0)
            .map(|(ino, _)| *ino)
            .collect();
        for ino in gone {
            self.nodes.remove(&ino);
            self.dirs.remove(&ino);
            self.freed.push(ino);
        }
        self.maybe_unused.clear();
    }

    /// Keeps a random prefix of each directory's pending operations.
    fn settle_journal<R: Rng + ?Sized>(&mut self, rng: &mut R, states: &mut CrashStates) {
        let journal = std::mem::take(&mut self.journal);
        let (pending, dropped): (Vec<Op>, Vec<Op>) = journal
            .into_iter()
            .partition(|op| op.state == OpState::Pending);
        for op in &dropped {
            self.release_journal_refs(op);
        }
        let kept = fate::keep_in_order(
            rng,
            pending
                .iter()
                .map(|op| op.changes.iter().map(|c| c.dir).collect::<Vec<_>>()),
        );
        // Per directory: (removals kept, removals lost).
        let mut removals: BTreeMap<Ino, (u64, u64)> = BTreeMap::new();
        for (op, kept) in pending.iter().zip(kept) {
            if op.kind == OpKind::Remove {
                let e = removals.entry(op.changes[0].dir).or_default();
                if kept { e.0 += 1 } else { e.1 += 1 }
            }
            if kept {
                states.unsynced_ops_kept += 1;
                if op.kind == OpKind::Rename {
                    states.renames_kept_unsynced += 1;
                }
                self.apply_durable(op);
            } else {
                states.unsynced_ops_lost += 1;
                self.release_journal_refs(op);
            }
        }
        states.removal_batches_split += removals
            .values()
            .filter(|(kept, lost)| *kept > 0 && *lost > 0)
            .count() as u64;
        for d in self.dirs.values_mut() {
            d.overlay.clear();
        }
    }

    /// Directories not reachable from the root through durable entries vanish, with
    /// their contents.
    fn remove_unreachable(&mut self, states: &mut CrashStates) {
        let mut reached: BTreeSet<Ino> = BTreeSet::new();
        let mut queue = vec![ROOT];
        while let Some(dir) = queue.pop() {
            if !reached.insert(dir) {
                continue;
            }
            if let Some(d) = self.dirs.get(&dir) {
                queue.extend(
                    d.durable
                        .values()
                        .copied()
                        .filter(|i| self.dirs.contains_key(i)),
                );
            }
        }
        let lost: Vec<Ino> = self
            .dirs
            .keys()
            .copied()
            .filter(|d| !reached.contains(d))
            .collect();
        for dir in lost {
            let d = self.dirs.remove(&dir).expect("listed");
            for ino in d.durable.values() {
                if let Some(node) = self.nodes.get_mut(ino) {
                    // A lost directory inside a lost directory may be zeroed first.
                    node.durable_links = node.durable_links.saturating_sub(1);
                }
            }
            if let Some(node) = self.nodes.get_mut(&dir) {
                node.durable_links = 0;
            }
            states.directories_lost += 1;
        }
    }
}
