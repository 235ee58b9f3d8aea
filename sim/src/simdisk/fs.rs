//! The file system model: what is live (what reads and listings see) and what is
//! durable (what a power loss keeps), per inode and per directory.
//!
//! - A file is an inode with two copies of its data: `live` (the page cache) and
//!   `durable` (the platter). `fsync`/`fdatasync` copies live to durable. Names are
//!   links to inodes, so a pending removal of one file never touches a new file that
//!   takes its name.
//! - A directory has a durable namespace and an overlay: the live value of every name
//!   changed by a namespace operation (create, rename, unlink, mkdir) that is not yet
//!   durable. Those operations wait in one journal, in issue order.
//! - Syncing a directory makes durable every journal operation touching it, and,
//!   so that each directory's durable namespace is always a prefix of its history,
//!   every earlier operation touching a directory those touch (a rename touches two).
//! - A failed directory sync keeps a random prefix of those operations and drops the
//!   rest: they stay visible (the page cache still has them) but no later sync makes
//!   them durable, as Linux marks failed pages clean. A failed file sync does the
//!   same to the file's data.
//! - A power loss keeps, of the operations still in the journal, a random prefix per
//!   directory (a rename survives whole or not at all, and cuts both directories'
//!   prefixes when it does not), and of each file's unsynced data one of: nothing,
//!   all of it, a zero-length file, or the new size with a random subset of its
//!   blocks and zeros elsewhere. Directories whose own entry did not survive vanish
//!   with their contents.
//!
//! Everything random comes from the caller's RNG; nothing here reads time.
//!
//! Directories are keyed by their paths' bytes, made normal where they come in
//! ([`normal`]): `Path`'s own comparison walks components, and the lookups and
//! journal scans of a long replay spent about 6% of its samples in it.

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use crashfs::model::{Fate, draw_fate, failed_sync_keeps, keep_in_order, mixed_bytes};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use spool::disk::Contents;

/// An inode number.
pub type Ino = u64;

/// What a directory entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// A regular file.
    File(Ino),
    /// A subdirectory (its path is the parent's path joined with the name).
    Dir,
}

#[derive(Debug, Clone)]
struct File {
    live: Contents,
    /// What a power loss keeps, where it may differ from `live` (`None`: the live
    /// data is durable). Nearly every file is synced right after it is written, so
    /// nearly every file holds one copy, and 8 bytes instead of a second `Contents`.
    unsynced: Option<Box<Contents>>,
    /// An fsync of this file failed: its dirty data was dropped and no later fsync
    /// writes it.
    writeback_lost: bool,
    /// Every read fails with EIO (a bad sector).
    unreadable: bool,
    live_links: u32,
    durable_links: u32,
    /// Journal operations that link this inode somewhere.
    journal_refs: u32,
}

impl File {
    /// The data a power loss keeps.
    fn durable(&self) -> &Contents {
        self.unsynced.as_deref().unwrap_or(&self.live)
    }

    /// Whether the live data is the durable data.
    fn is_synced(&self) -> bool {
        self.unsynced
            .as_deref()
            .is_none_or(|durable| *durable == self.live)
    }

    /// Makes `data` both the live and the durable data.
    fn settle(&mut self, data: Contents) {
        self.live = data;
        self.unsynced = None;
    }
}

#[derive(Debug, Default)]
struct Dir {
    durable: BTreeMap<String, Node>,
    /// Live value of every name changed by a journal operation.
    overlay: BTreeMap<String, Option<Node>>,
}

/// One name set to a value (`None`: removed) by a namespace operation.
#[derive(Debug, Clone)]
struct Change {
    /// The directory's normal path ([`normal`]).
    dir: OsString,
    name: String,
    node: Option<Node>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpState {
    /// Not yet durable; a sync or a power loss decides.
    Pending,
    /// A failed sync dropped it: visible until the power goes, never durable.
    Dropped,
}

/// A namespace operation: one change, or two applied atomically (a rename).
#[derive(Debug, Clone)]
struct Op {
    /// Issue order.
    id: u64,
    changes: Vec<Change>,
    state: OpState,
    rename: bool,
    unlink: bool,
}

/// What power losses produced, over the life of a disk: the crash states a run
/// reached. The crash file system counts the same (one model: `crashfs::model`).
pub use crashfs::model::CrashStates;

/// The whole file system of one host.
#[derive(Debug)]
pub struct Fs {
    /// Boxed: a map node holds eleven slots and is about half full when keys only
    /// grow, so an inline `File` would cost twice its size.
    files: BTreeMap<Ino, Box<File>>,
    next_ino: Ino,
    /// By normal path ([`normal`]).
    dirs: BTreeMap<OsString, Dir>,
    journal: Vec<Op>,
    /// Bytes of live file data.
    used_bytes: u64,
    block_bytes: usize,
    /// Inodes whose link or reference counts dropped since the last collection.
    maybe_unused: Vec<Ino>,
    /// The next operation's id.
    next_op: u64,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: No such file or directory", path.display()),
    )
}

/// `path` without `.` components and doubled or trailing separators, so that two
/// normal paths name the same directory exactly when their bytes are equal. Paths
/// the spool makes are normal already and are not copied.
fn normal(path: &Path) -> Cow<'_, Path> {
    if needs_work(path.as_os_str().as_encoded_bytes()) {
        Cow::Owned(path.components().collect())
    } else {
        Cow::Borrowed(path)
    }
}

/// Whether `bytes` hold `//` or `/./`, or end in `/.` or (past the root) in `/`:
/// what [`normal`] removes. One pass over the bytes: this runs for every operation.
fn needs_work(bytes: &[u8]) -> bool {
    if bytes.len() > 1 && bytes.ends_with(b"/") || bytes.ends_with(b"/.") {
        return true;
    }
    let mut after_slash = false;
    for (i, &b) in bytes.iter().enumerate() {
        if after_slash && (b == b'/' || (b == b'.' && bytes.get(i + 1) == Some(&b'/'))) {
            return true;
        }
        after_slash = b == b'/';
    }
    false
}

/// A normal path's parent and file name. A UTF-8 path is cut at its last separator
/// (what `Path::parent` and `Path::file_name` give for a normal path, without
/// walking its components); any other goes through `Path`.
fn split(path: &Path) -> io::Result<(&Path, &str)> {
    let Some(text) = path.to_str() else {
        return split_by_components(path);
    };
    let (parent, name) = match text.rfind('/') {
        Some(0) => ("/", &text[1..]),
        Some(at) => (&text[..at], &text[at + 1..]),
        None => ("", text),
    };
    if text.is_empty() || matches!(name, "" | "." | "..") {
        return Err(not_found(path));
    }
    debug_assert_eq!(
        split_by_components(path).ok(),
        Some((Path::new(parent), name))
    );
    Ok((Path::new(parent), name))
}

/// [`split`] by `Path`'s components.
fn split_by_components(path: &Path) -> io::Result<(&Path, &str)> {
    let parent = path.parent().ok_or_else(|| not_found(path))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| not_found(path))?;
    Ok((parent, name))
}

impl Fs {
    /// An empty file system (only `/`), whose power losses tear data in blocks of
    /// `block_bytes`.
    pub fn new(block_bytes: usize) -> Self {
        let mut dirs = BTreeMap::new();
        dirs.insert(OsString::from("/"), Dir::default());
        Self {
            files: BTreeMap::new(),
            next_ino: 1,
            dirs,
            journal: Vec::new(),
            used_bytes: 0,
            block_bytes: block_bytes.max(1),
            maybe_unused: Vec::new(),
            next_op: 0,
        }
    }

    /// Bytes of live file data.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Namespace operations waiting for a sync.
    pub fn journal_len(&self) -> usize {
        self.journal.len()
    }

    fn live(&self, dir: &OsStr, name: &str) -> Option<Node> {
        let d = self.dirs.get(dir)?;
        match d.overlay.get(name) {
            Some(node) => *node,
            None => d.durable.get(name).copied(),
        }
    }

    /// The inode `path` names now, if it is a file.
    pub fn lookup(&self, path: &Path) -> io::Result<Ino> {
        self.lookup_normal(&normal(path))
    }

    /// [`Self::lookup`] of a path already made normal.
    fn lookup_normal(&self, path: &Path) -> io::Result<Ino> {
        let (dir, name) = split(path)?;
        match self.live(dir.as_os_str(), name) {
            Some(Node::File(ino)) => Ok(ino),
            Some(Node::Dir) => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{}: Is a directory", path.display()),
            )),
            None => Err(not_found(path)),
        }
    }

    /// Whether `dir` exists now.
    pub fn dir_exists(&self, dir: &Path) -> bool {
        self.has_dir(&normal(dir))
    }

    /// [`Self::dir_exists`] of a path already made normal.
    fn has_dir(&self, dir: &Path) -> bool {
        self.dirs.contains_key(dir.as_os_str())
    }

    /// Applies `changes` to the live view and journals them as one operation.
    /// `replaced` holds, for each change, the file its name links now (the caller
    /// has looked it up already; the name maps are large, the lookups not free).
    fn issue(&mut self, changes: Vec<Change>, replaced: &[Option<Ino>], rename: bool) {
        debug_assert_eq!(changes.len(), replaced.len());
        for (c, &old) in changes.iter().zip(replaced) {
            debug_assert_eq!(
                old.map(Node::File),
                self.live(&c.dir, &c.name)
                    .filter(|n| matches!(n, Node::File(_)))
            );
            if let Some(ino) = old {
                self.files.get_mut(&ino).expect("linked inode").live_links -= 1;
                self.maybe_unused.push(ino);
            }
            if let Some(Node::File(ino)) = c.node {
                let file = self.files.get_mut(&ino).expect("linked inode");
                file.live_links += 1;
                file.journal_refs += 1;
            }
            self.dirs
                .get_mut(&c.dir)
                .expect("changes are issued in existing directories")
                .overlay
                .insert(c.name.clone(), c.node);
        }
        let unlink = !rename && changes.iter().all(|c| c.node.is_none());
        self.next_op += 1;
        self.journal.push(Op {
            id: self.next_op,
            changes,
            state: OpState::Pending,
            rename,
            unlink,
        });
        self.collect_garbage();
    }

    /// Creates an empty file at `path`, which must not exist.
    pub fn create(&mut self, path: &Path) -> io::Result<Ino> {
        let path = normal(path);
        let (dir, name) = split(&path)?;
        if !self.has_dir(dir) {
            return Err(not_found(dir));
        }
        if self.live(dir.as_os_str(), name).is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: File exists", path.display()),
            ));
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.files.insert(
            ino,
            Box::new(File {
                live: Contents::default(),
                unsynced: None,
                writeback_lost: false,
                unreadable: false,
                live_links: 0,
                durable_links: 0,
                journal_refs: 0,
            }),
        );
        let change = Change {
            dir: dir.as_os_str().to_owned(),
            name: name.to_owned(),
            node: Some(Node::File(ino)),
        };
        self.issue(vec![change], &[None], false);
        Ok(ino)
    }

    /// Creates `dir` (its parent must exist); a no-op if it exists.
    pub fn mkdir(&mut self, dir: &Path) -> io::Result<()> {
        let dir = normal(dir);
        if self.has_dir(&dir) {
            return Ok(());
        }
        let (parent, name) = split(&dir)?;
        if !self.has_dir(parent) {
            return Err(not_found(parent));
        }
        if self.live(parent.as_os_str(), name).is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: File exists", dir.display()),
            ));
        }
        self.dirs.insert(dir.as_os_str().to_owned(), Dir::default());
        let change = Change {
            dir: parent.as_os_str().to_owned(),
            name: name.to_owned(),
            node: Some(Node::Dir),
        };
        self.issue(vec![change], &[None], false);
        Ok(())
    }

    /// Sets the live copy of a new, empty `ino` to `data` without copying it.
    pub fn fill(&mut self, ino: Ino, data: Contents) {
        let file = self.files.get_mut(&ino).expect("open inode");
        debug_assert!(file.live.is_empty(), "fill is for new files");
        self.used_bytes += data.len() as u64;
        if file.unsynced.is_none() {
            file.unsynced = Some(Box::new(std::mem::take(&mut file.live)));
        }
        file.live = data;
    }

    /// Appends `data` to the live copy of `ino` (a file written as its bytes arrive).
    /// The payload a streamed entry brings is kept as the file's second piece
    /// without copying when the file held only its first (the placeholder header).
    pub fn append(&mut self, ino: Ino, data: bytes::Bytes) {
        let file = self.files.get_mut(&ino).expect("open inode");
        self.used_bytes += data.len() as u64;
        let live = std::mem::take(&mut file.live);
        if file.unsynced.is_none() {
            file.unsynced = Some(Box::new(live.clone()));
        }
        file.live = match (live.head.is_empty(), live.body.is_empty()) {
            (_, true) => Contents::new(live.head, data),
            (true, false) => Contents::new(live.body, data),
            (false, false) => Contents::new(live.to_bytes(), data),
        };
    }

    /// Overwrites the live bytes of `ino` at `offset` with `data`, which lie within
    /// its length (a streamed entry's header, written last). Within the first piece
    /// only that piece is copied.
    pub fn write_at(&mut self, ino: Ino, offset: usize, data: &[u8]) -> io::Result<()> {
        let file = self.files.get_mut(&ino).expect("open inode");
        let end = offset
            .checked_add(data.len())
            .filter(|&end| end <= file.live.len())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "write_at past the end of the file",
                )
            })?;
        if file.unsynced.is_none() {
            file.unsynced = Some(Box::new(file.live.clone()));
        }
        let live = &mut file.live;
        if end <= live.head.len() {
            let mut head = live.head.to_vec();
            head[offset..end].copy_from_slice(data);
            live.head = head.into();
        } else {
            let mut all = live.to_vec();
            all[offset..end].copy_from_slice(data);
            *live = Contents::from(bytes::Bytes::from(all));
        }
        Ok(())
    }

    /// fsync/fdatasync: the live data becomes durable, unless an earlier failed sync
    /// dropped it. `fail` makes this sync fail: the dirty data is dropped.
    pub fn sync_file(&mut self, ino: Ino, fail: bool) {
        let file = self.files.get_mut(&ino).expect("open inode");
        if fail {
            file.writeback_lost = true;
        } else if !file.writeback_lost {
            file.unsynced = None;
        }
    }

    /// Renames the file at `from` to `to`, replacing a file there.
    pub fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normal(from), normal(to));
        let ino = self.lookup_normal(&from)?;
        let (from_dir, from_name) = split(&from)?;
        let (to_dir, to_name) = split(&to)?;
        if !self.has_dir(to_dir) {
            return Err(not_found(to_dir));
        }
        let replaced = match self.live(to_dir.as_os_str(), to_name) {
            Some(Node::Dir) => {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{}: Is a directory", to.display()),
                ));
            }
            Some(Node::File(old)) => Some(old),
            None => None,
        };
        if from == to {
            return Ok(());
        }
        let changes = vec![
            Change {
                dir: from_dir.as_os_str().to_owned(),
                name: from_name.to_owned(),
                node: None,
            },
            Change {
                dir: to_dir.as_os_str().to_owned(),
                name: to_name.to_owned(),
                node: Some(Node::File(ino)),
            },
        ];
        self.issue(changes, &[Some(ino), replaced], true);
        Ok(())
    }

    /// Removes the name `path` (a file).
    pub fn unlink(&mut self, path: &Path) -> io::Result<()> {
        let path = normal(path);
        let ino = self.lookup_normal(&path)?;
        let (dir, name) = split(&path)?;
        let change = Change {
            dir: dir.as_os_str().to_owned(),
            name: name.to_owned(),
            node: None,
        };
        self.issue(vec![change], &[Some(ino)], false);
        Ok(())
    }

    /// The names of the files (not directories) in `dir`, sorted.
    pub fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self.names(dir)?.map(str::to_owned).collect())
    }

    /// The names of the files (not directories) in `dir` now, sorted, borrowed.
    pub fn names<'a>(&'a self, dir: &Path) -> io::Result<impl Iterator<Item = &'a str>> {
        Ok(self.files_in(dir)?.map(|(name, _)| name))
    }

    /// The files (not directories) in `dir` now with their inodes, sorted by name,
    /// borrowed: the durable namespace and the overlay are both sorted, so one merge
    /// of the two (the overlay's value winning a name both have) needs no copy and
    /// no sort.
    pub fn files_in<'a>(&'a self, dir: &Path) -> io::Result<impl Iterator<Item = (&'a str, Ino)>> {
        let d = self
            .dirs
            .get(normal(dir).as_os_str())
            .ok_or_else(|| not_found(dir))?;
        let mut durable = d.durable.iter().map(|(n, node)| (n.as_str(), Some(*node)));
        let mut overlay = d.overlay.iter().map(|(n, node)| (n.as_str(), *node));
        let (mut next_durable, mut next_overlay) = (durable.next(), overlay.next());
        Ok(std::iter::from_fn(move || {
            loop {
                let (name, node) = match (next_durable, next_overlay) {
                    (None, None) => return None,
                    (Some(dn), Some(on)) if dn.0 == on.0 => {
                        next_durable = durable.next();
                        std::mem::replace(&mut next_overlay, overlay.next())?
                    }
                    (Some(dn), on) if on.is_none_or(|on| dn.0 < on.0) => {
                        std::mem::replace(&mut next_durable, durable.next())?
                    }
                    _ => std::mem::replace(&mut next_overlay, overlay.next())?,
                };
                if let Some(Node::File(ino)) = node {
                    return Some((name, ino));
                }
            }
        }))
    }

    /// The files in `dir` with their live sizes (empty if `dir` does not exist).
    pub fn sizes(&self, dir: &Path) -> Vec<(String, u64)> {
        self.list(dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|name| {
                let ino = self.lookup(&dir.join(&name)).ok()?;
                Some((name, self.files[&ino].live.len() as u64))
            })
            .collect()
    }

    /// The live data of `ino`, or EIO if it sits on a bad sector.
    pub fn read(&self, ino: Ino) -> io::Result<Contents> {
        let file = &self.files[&ino];
        if file.unreadable {
            return Err(io::Error::other("Input/output error (bad sector)"));
        }
        Ok(file.live.clone())
    }

    /// The live data of `ino`, whatever its sectors say (for the damage record).
    pub fn peek(&self, ino: Ino) -> Contents {
        self.files[&ino].live.clone()
    }

    /// Makes every read of `ino` fail from now on.
    pub fn make_unreadable(&mut self, ino: Ino) {
        self.files.get_mut(&ino).expect("inode").unreadable = true;
    }

    /// Flips one bit of `ino`'s synced data at rest (live and durable), if it has any
    /// synced data; returns whether it did.
    pub fn corrupt_at_rest(&mut self, ino: Ino, rng: &mut ChaCha8Rng) -> bool {
        let file = self.files.get_mut(&ino).expect("inode");
        if file.durable().is_empty() || !file.is_synced() {
            return false;
        }
        let mut data = file.durable().to_vec();
        let at = rng.random_range(0..data.len());
        data[at] ^= 1 << rng.random_range(0..8u32);
        file.settle(Contents::from(data));
        true
    }

    /// The journal operations a sync of `dir` makes durable, in journal order: those
    /// touching `dir`, and every earlier one touching a directory they touch. One
    /// pass from the newest: an operation is in when it touches `dir` or a directory
    /// that a later operation in the set touches.
    fn sync_set(&self, dir: &OsStr) -> Vec<usize> {
        let mut chosen = Vec::new();
        // The directories touched by the operations chosen so far.
        let mut reached: Vec<&OsStr> = vec![dir];
        for (i, op) in self.journal.iter().enumerate().rev() {
            if op.state != OpState::Pending
                || !op
                    .changes
                    .iter()
                    .any(|c| reached.contains(&c.dir.as_os_str()))
            {
                continue;
            }
            chosen.push(i);
            for c in &op.changes {
                if !reached.contains(&c.dir.as_os_str()) {
                    reached.push(&c.dir);
                }
            }
        }
        chosen.reverse();
        debug_assert!(chosen.is_sorted());
        chosen
    }

    /// Syncs `dir`. With `fail`, a random prefix of what it would make durable
    /// becomes durable and the rest is dropped (an fsync that returned EIO).
    pub fn sync_dir(&mut self, dir: &Path, fail: Option<&mut ChaCha8Rng>) -> io::Result<()> {
        let dir = normal(dir);
        if !self.has_dir(&dir) {
            return Err(not_found(&dir));
        }
        let set = self.sync_set(dir.as_os_str());
        let keep = match fail {
            None => set.len(),
            Some(rng) => failed_sync_keeps(rng, set.len()),
        };
        let (kept, dropped) = set.split_at(keep);
        for &i in dropped {
            self.journal[i].state = OpState::Dropped;
        }
        self.make_durable(kept);
        Ok(())
    }

    /// Applies the journal operations at `indices` (ascending) to the durable
    /// namespace and removes them from the journal. The live view does not change: a
    /// name leaves the overlay only when no operation left in the journal comes after
    /// one just applied to it (its live value is then its durable one).
    fn make_durable(&mut self, indices: &[usize]) {
        debug_assert!(indices.is_sorted());
        if indices.is_empty() {
            return;
        }
        let journal = std::mem::take(&mut self.journal);
        self.journal = Vec::with_capacity(journal.len() - indices.len());
        let mut applied = Vec::with_capacity(indices.len());
        let mut next = indices.iter().peekable();
        for (i, op) in journal.into_iter().enumerate() {
            if next.next_if_eq(&&i).is_some() {
                self.apply_durable(&op);
                applied.push(op);
            } else {
                self.journal.push(op);
            }
        }
        debug_assert!(next.peek().is_none(), "indices lie in the journal");
        for op in &applied {
            for c in &op.changes {
                let later = self.journal.iter().any(|o| {
                    o.id > op.id && o.changes.iter().any(|l| l.dir == c.dir && l.name == c.name)
                });
                if !later && let Some(d) = self.dirs.get_mut(&c.dir) {
                    d.overlay.remove(&c.name);
                }
            }
        }
        self.collect_garbage();
    }

    fn apply_durable(&mut self, op: &Op) {
        for c in &op.changes {
            let Some(dir) = self.dirs.get_mut(&c.dir) else {
                continue; // the directory itself did not survive
            };
            let old = match c.node {
                Some(node) => dir.durable.insert(c.name.clone(), node),
                None => dir.durable.remove(&c.name),
            };
            if let Some(Node::File(ino)) = old {
                self.files.get_mut(&ino).expect("inode").durable_links -= 1;
                self.maybe_unused.push(ino);
            }
            if let Some(Node::File(ino)) = c.node {
                let file = self.files.get_mut(&ino).expect("inode");
                file.durable_links += 1;
                file.journal_refs -= 1;
                self.maybe_unused.push(ino);
            }
        }
    }

    fn release_journal_refs(&mut self, op: &Op) {
        for c in &op.changes {
            if let Some(Node::File(ino)) = c.node {
                self.files.get_mut(&ino).expect("inode").journal_refs -= 1;
                self.maybe_unused.push(ino);
            }
        }
    }

    /// Frees the inodes in `maybe_unused` that no name or journal operation refers
    /// to any more.
    fn collect_garbage(&mut self) {
        for ino in std::mem::take(&mut self.maybe_unused) {
            let unused = self
                .files
                .get(&ino)
                .is_some_and(|f| f.live_links == 0 && f.durable_links == 0 && f.journal_refs == 0);
            if unused {
                let file = self.files.remove(&ino).expect("checked");
                self.used_bytes -= file.live.len() as u64;
            }
        }
    }

    /// Power loss: decides what survives, and the live view becomes the durable one.
    pub fn power_loss(&mut self, rng: &mut ChaCha8Rng) -> CrashStates {
        let mut states = CrashStates {
            power_losses: 1,
            ..CrashStates::default()
        };
        self.settle_journal(rng, &mut states);
        self.remove_orphan_dirs(&mut states);
        self.settle_data(rng, &mut states);
        self.files.retain(|_, f| f.durable_links > 0);
        self.maybe_unused.clear();
        for f in self.files.values_mut() {
            f.live_links = f.durable_links;
            f.journal_refs = 0;
        }
        self.used_bytes = self.files.values().map(|f| f.live.len() as u64).sum();
        states
    }

    /// Keeps a random prefix of each directory's pending operations.
    fn settle_journal(&mut self, rng: &mut ChaCha8Rng, states: &mut CrashStates) {
        let (dropped, pending): (Vec<Op>, Vec<Op>) = std::mem::take(&mut self.journal)
            .into_iter()
            .partition(|op| op.state == OpState::Dropped);
        for op in &dropped {
            self.release_journal_refs(op);
        }
        let touched = pending
            .iter()
            .map(|op| op.changes.iter().map(|c| c.dir.clone()).collect::<Vec<_>>());
        let keeps = keep_in_order(rng, touched);
        // Per directory: (unlinks kept, unlinks lost).
        let mut unlinks: BTreeMap<OsString, (u64, u64)> = BTreeMap::new();
        for (op, kept) in pending.iter().zip(keeps) {
            if op.unlink {
                let e = unlinks.entry(op.changes[0].dir.clone()).or_default();
                if kept { e.0 += 1 } else { e.1 += 1 }
            }
            if kept {
                states.unsynced_ops_kept += 1;
                if op.rename {
                    states.renames_kept_unsynced += 1;
                }
                self.apply_durable(op);
            } else {
                states.unsynced_ops_lost += 1;
                self.release_journal_refs(op);
            }
        }
        states.removal_batches_split += unlinks
            .values()
            .filter(|(kept, lost)| *kept > 0 && *lost > 0)
            .count() as u64;
        for d in self.dirs.values_mut() {
            d.overlay.clear();
        }
    }

    /// Directories whose entry in their parent is not durable vanish, with their
    /// contents.
    fn remove_orphan_dirs(&mut self, states: &mut CrashStates) {
        let paths: Vec<OsString> = self.dirs.keys().cloned().collect();
        for path in paths {
            let path = Path::new(&path);
            if path == Path::new("/") || !self.dirs.contains_key(path.as_os_str()) {
                continue;
            }
            let linked = split(path).is_ok_and(|(parent, name)| {
                self.dirs
                    .get(parent.as_os_str())
                    .is_some_and(|p| p.durable.get(name) == Some(&Node::Dir))
            });
            if !linked {
                let gone: Vec<OsString> = self
                    .dirs
                    .keys()
                    .filter(|p| Path::new(p).starts_with(path))
                    .cloned()
                    .collect();
                for p in gone {
                    let dir = self.dirs.remove(&p).expect("listed");
                    for node in dir.durable.values() {
                        if let Node::File(ino) = node {
                            self.files.get_mut(ino).expect("inode").durable_links -= 1;
                        }
                    }
                    states.directories_lost += 1;
                }
            }
        }
    }

    /// Each file's unsynced data: lost, kept, zero length, or some blocks zeroed.
    fn settle_data(&mut self, rng: &mut ChaCha8Rng, states: &mut CrashStates) {
        let block = self.block_bytes;
        for file in self.files.values_mut() {
            if file.is_synced() || file.durable_links == 0 {
                file.settle(file.durable().clone());
                continue;
            }
            if file.writeback_lost {
                file.settle(file.durable().clone());
                states.unsynced_data_lost += 1;
                continue;
            }
            let fate = draw_fate(rng, file.live.len() as u64, block as u64);
            states.count_fate(&fate);
            let outcome = match fate {
                Fate::Lost => file.durable().clone(),
                Fate::Kept => file.live.clone(),
                Fate::ZeroLength => Contents::default(),
                Fate::Mixed { revert } => {
                    let durable = file.durable().to_vec();
                    Contents::from(mixed_bytes(&file.live.to_vec(), &durable, block, &revert))
                }
            };
            file.settle(outcome);
            file.writeback_lost = false;
        }
    }
}
