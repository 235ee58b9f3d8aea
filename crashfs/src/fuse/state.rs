//! The file system's state and its operations, each a real call on the backing
//! directory plus what the model must remember of it. Every operation runs under one
//! lock (the FUSE session is one thread; the control interface takes the same lock),
//! so a power loss never falls inside an operation.
//!
//! Promises: an fsync or fsyncdir returns only after the model recorded what it made
//! durable; a handle opened before a power loss fails with EIO afterwards; inode
//! numbers are never reused, and an inode that survives a power loss keeps its
//! number.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use fuser::Errno;
use rand_chacha::ChaCha8Rng;

use super::backing::Backing;
use crate::faults::{self, Faults, OpKind};
use crate::model::{FileData, Ino, Kind, Namespace, NamespaceError};
use crate::stats::Stats;

/// An open file or directory.
#[derive(Debug)]
pub(crate) enum Handle {
    File {
        ino: Ino,
        file: File,
    },
    Dir {
        ino: Ino,
        entries: Vec<(OsString, Ino, Kind)>,
    },
}

/// Everything crashfs knows.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) ns: Namespace,
    /// The durable state of every file inode the backing directory holds.
    pub(crate) files: BTreeMap<Ino, FileData>,
    pub(crate) backing: Backing,
    pub(crate) handles: BTreeMap<u64, Handle>,
    next_fh: u64,
    /// Open handles per inode.
    open: BTreeMap<Ino, u32>,
    pub(crate) faults: Faults,
    /// Draws of power losses given no seed of their own.
    pub(crate) rng: ChaCha8Rng,
    pub(crate) block_bytes: u64,
    pub(crate) stats: Stats,
}

pub(crate) fn ns_errno(e: NamespaceError) -> Errno {
    match e {
        NamespaceError::NotFound => Errno::ENOENT,
        NamespaceError::Exists => Errno::EEXIST,
        NamespaceError::NotDir => Errno::ENOTDIR,
        NamespaceError::IsDir => Errno::EISDIR,
        NamespaceError::NotEmpty => Errno::ENOTEMPTY,
        NamespaceError::Invalid => Errno::EINVAL,
    }
}

fn fault_errno(e: faults::Errno) -> Errno {
    Errno::from_i32(e.code())
}

/// The open file behind `fh`.
fn file_of(handles: &BTreeMap<u64, Handle>, fh: u64) -> Result<(Ino, &File), Errno> {
    match handles.get(&fh) {
        Some(Handle::File { ino, file }) => Ok((*ino, file)),
        Some(Handle::Dir { .. }) => Err(Errno::EISDIR),
        // Opened before a power loss, or never opened.
        None => Err(Errno::EIO),
    }
}

/// Truncates or extends `ino` (open as `file`) to `len_bytes`, recording it.
fn set_len(
    files: &mut BTreeMap<Ino, FileData>,
    ino: Ino,
    file: &File,
    len_bytes: u64,
) -> Result<(), Errno> {
    let live_bytes = file.metadata()?.len();
    let data = files.get_mut(&ino).ok_or(Errno::EIO)?;
    data.before_set_len(len_bytes, live_bytes, &mut |o, l| read_at(file, o, l))?;
    file.set_len(len_bytes)?;
    Ok(())
}

/// Reads up to `len` bytes at `offset`, fewer only at the end of the file.
pub(crate) fn read_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

impl State {
    pub(crate) fn new(
        ns: Namespace,
        files: BTreeMap<Ino, FileData>,
        backing: Backing,
        seed: u64,
        block_bytes: u64,
    ) -> Self {
        use rand::SeedableRng;
        let mut fault_rng = ChaCha8Rng::seed_from_u64(seed);
        fault_rng.set_stream(1);
        Self {
            ns,
            files,
            backing,
            handles: BTreeMap::new(),
            next_fh: 1,
            open: BTreeMap::new(),
            faults: Faults::new(rand::Rng::random(&mut fault_rng)),
            rng: ChaCha8Rng::seed_from_u64(seed),
            block_bytes,
            stats: Stats::default(),
        }
    }

    /// Fails with the injected errno when a fault of `kind` is drawn.
    pub(crate) fn fault(&mut self, kind: OpKind) -> Result<(), Errno> {
        match self.faults.draw(kind) {
            Some(e) => Err(fault_errno(e)),
            None => Ok(()),
        }
    }

    /// Where `ino`'s bytes are now.
    pub(crate) fn location(&self, ino: Ino) -> PathBuf {
        self.backing.location(&self.ns, ino)
    }

    /// Metadata of `ino`, through its handle when one is given.
    pub(crate) fn metadata(&self, ino: Ino, fh: Option<u64>) -> Result<fs::Metadata, Errno> {
        if let Some(Handle::File { file, .. }) = fh.and_then(|fh| self.handles.get(&fh)) {
            return Ok(file.metadata()?);
        }
        if self.ns.kind(ino).is_none() && !self.open.contains_key(&ino) {
            return Err(Errno::ENOENT);
        }
        Ok(fs::symlink_metadata(self.location(ino))?)
    }

    fn add_handle(&mut self, handle: Handle) -> u64 {
        let ino = match &handle {
            Handle::File { ino, .. } | Handle::Dir { ino, .. } => *ino,
        };
        *self.open.entry(ino).or_default() += 1;
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, handle);
        fh
    }

    /// Closes `fh` (a handle from before a power loss is gone already).
    pub(crate) fn release(&mut self, fh: u64) {
        let Some(handle) = self.handles.remove(&fh) else {
            return;
        };
        let ino = match handle {
            Handle::File { ino, .. } | Handle::Dir { ino, .. } => ino,
        };
        if let Some(n) = self.open.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&ino);
            }
        }
        self.reap(&[ino]);
    }

    /// Forgets every handle (a power loss: their processes died with it); returns
    /// how many there were. Inodes only they held go with the rebuild.
    pub(crate) fn forget_handles(&mut self) -> u64 {
        let n = self.handles.len() as u64;
        self.handles.clear();
        self.open.clear();
        n
    }

    /// Deletes the storage of inodes nothing needs any more: the namespace freed
    /// them and no handle holds them.
    pub(crate) fn reap(&mut self, inos: &[Ino]) {
        let mut candidates = self.ns.take_freed();
        candidates.extend_from_slice(inos);
        for ino in candidates {
            if self.ns.kind(ino).is_none() && !self.open.contains_key(&ino) {
                self.backing.reap(ino);
                self.files.remove(&ino);
            }
        }
    }

    /// The open file behind `fh`.
    fn file(&self, fh: u64) -> Result<(Ino, &File), Errno> {
        file_of(&self.handles, fh)
    }

    pub(crate) fn open(&mut self, ino: Ino, flags: i32) -> Result<u64, Errno> {
        match self.ns.kind(ino) {
            Some(Kind::File) => {}
            Some(Kind::Dir) => return Err(Errno::EISDIR),
            None if self.open.contains_key(&ino) => {}
            None => return Err(Errno::ENOENT),
        }
        self.fault(OpKind::Open)?;
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let file = fs::OpenOptions::new()
            .read(true)
            .write(writable)
            .open(self.location(ino))?;
        if writable && flags & libc::O_TRUNC != 0 {
            set_len(&mut self.files, ino, &file, 0)?;
        }
        Ok(self.add_handle(Handle::File { ino, file }))
    }

    pub(crate) fn create(
        &mut self,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        owner: (u32, u32),
    ) -> Result<(Ino, u64), Errno> {
        self.check_new_name(parent, name)?;
        self.fault(OpKind::Create)?;
        let path = self.location(parent).join(name);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)?;
        std::os::unix::fs::fchown(&file, Some(owner.0), Some(owner.1))?;
        let ino = self.ns.create(parent, name, Kind::File).map_err(ns_errno)?;
        self.files
            .insert(ino, FileData::durable(0, self.block_bytes));
        Ok((ino, self.add_handle(Handle::File { ino, file })))
    }

    fn check_new_name(&self, parent: Ino, name: &OsStr) -> Result<(), Errno> {
        if Backing::is_reserved(parent, name) {
            return Err(Errno::EACCES);
        }
        self.ns.check_create(parent, name).map_err(ns_errno)
    }

    pub(crate) fn mkdir(
        &mut self,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        owner: (u32, u32),
    ) -> Result<Ino, Errno> {
        self.check_new_name(parent, name)?;
        self.fault(OpKind::Mkdir)?;
        let path = self.location(parent).join(name);
        fs::create_dir(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
        std::os::unix::fs::chown(&path, Some(owner.0), Some(owner.1))?;
        self.ns.create(parent, name, Kind::Dir).map_err(ns_errno)
    }

    pub(crate) fn read(&mut self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        self.file(fh)?;
        self.fault(OpKind::Read)?;
        let (_, file) = self.file(fh)?;
        Ok(read_at(file, offset, size as usize)?)
    }

    pub(crate) fn write(&mut self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        self.file(fh)?;
        self.fault(OpKind::Write)?;
        let (ino, file) = file_of(&self.handles, fh)?;
        let live_bytes = file.metadata()?.len();
        let model = self.files.get_mut(&ino).ok_or(Errno::EIO)?;
        model.before_write(offset, data.len(), live_bytes, &mut |o, l| {
            read_at(file, o, l)
        })?;
        file.write_all_at(data, offset)?;
        Ok(data.len() as u32)
    }

    /// fsync/fdatasync of a file: durable once the model says so. A failed one
    /// drops the unsynced data for good.
    pub(crate) fn fsync(&mut self, fh: u64) -> Result<(), Errno> {
        let (ino, _) = self.file(fh)?;
        if let Some(e) = self.faults.draw(OpKind::Fsync) {
            self.files.get_mut(&ino).ok_or(Errno::EIO)?.sync_failed();
            return Err(fault_errno(e));
        }
        let (_, file) = file_of(&self.handles, fh)?;
        file.sync_data()?;
        let live_bytes = file.metadata()?.len();
        self.files
            .get_mut(&ino)
            .ok_or(Errno::EIO)?
            .synced(live_bytes);
        Ok(())
    }

    /// fsync of a directory: its pending namespace operations become durable (a
    /// failed one keeps a random prefix and drops the rest for good).
    pub(crate) fn fsyncdir(&mut self, ino: Ino) -> Result<(), Errno> {
        if let Some(e) = self.faults.draw(OpKind::Fsyncdir) {
            self.ns.sync_dir(ino, Some(self.faults.rng()));
            self.reap(&[]);
            return Err(fault_errno(e));
        }
        if self.ns.is_linked(ino) {
            File::open(self.location(ino))?.sync_all()?;
        }
        self.ns.sync_dir::<ChaCha8Rng>(ino, None);
        self.reap(&[]);
        Ok(())
    }

    pub(crate) fn opendir(&mut self, ino: Ino) -> Result<u64, Errno> {
        let listed = self.ns.list(ino).map_err(ns_errno)?;
        let parent = self.ns.parent(ino).unwrap_or(ino);
        let mut entries = vec![
            (OsString::from("."), ino, Kind::Dir),
            (OsString::from(".."), parent, Kind::Dir),
        ];
        for (name, child) in listed {
            let kind = self.ns.kind(child).unwrap_or(Kind::File);
            entries.push((name, child, kind));
        }
        Ok(self.add_handle(Handle::Dir { ino, entries }))
    }

    /// The entries of an open directory from `offset` on (a listing fault hits
    /// the first read).
    pub(crate) fn readdir(
        &mut self,
        fh: u64,
        offset: u64,
    ) -> Result<Vec<(OsString, Ino, Kind)>, Errno> {
        if !matches!(self.handles.get(&fh), Some(Handle::Dir { .. })) {
            return Err(Errno::EIO);
        }
        if offset == 0 {
            self.fault(OpKind::Readdir)?;
        }
        match self.handles.get(&fh) {
            Some(Handle::Dir { entries, .. }) => {
                Ok(entries.iter().skip(offset as usize).cloned().collect())
            }
            _ => Err(Errno::EIO),
        }
    }

    pub(crate) fn unlink(&mut self, parent: Ino, name: &OsStr, kind: Kind) -> Result<(), Errno> {
        let ino = self.ns.check_remove(parent, name, kind).map_err(ns_errno)?;
        let fault_kind = if kind == Kind::Dir {
            OpKind::Rmdir
        } else {
            OpKind::Unlink
        };
        if let Some(e) = self.faults.draw(fault_kind) {
            // EIO: the removal may have happened anyway.
            if e != faults::Errno::EIO || !self.faults.coin() {
                return Err(fault_errno(e));
            }
            self.remove(parent, name, ino, kind)?;
            return Err(fault_errno(e));
        }
        self.remove(parent, name, ino, kind)
    }

    fn remove(&mut self, parent: Ino, name: &OsStr, ino: Ino, kind: Kind) -> Result<(), Errno> {
        self.backing.bury(&self.location(ino), ino)?;
        self.ns.remove(parent, name, kind).map_err(ns_errno)?;
        self.reap(&[ino]);
        Ok(())
    }

    pub(crate) fn rename(
        &mut self,
        from: (Ino, &OsStr),
        to: (Ino, &OsStr),
        noreplace: bool,
    ) -> Result<(), Errno> {
        if Backing::is_reserved(to.0, to.1) {
            return Err(Errno::EACCES);
        }
        let (ino, target) = self
            .ns
            .check_rename(from.0, from.1, to.0, to.1)
            .map_err(ns_errno)?;
        if noreplace && target.is_some() {
            return Err(Errno::EEXIST);
        }
        if let Some(e) = self.faults.draw(OpKind::Rename) {
            if e != faults::Errno::EIO || !self.faults.coin() {
                return Err(fault_errno(e));
            }
            self.do_rename(from, to, ino, target)?;
            return Err(fault_errno(e));
        }
        self.do_rename(from, to, ino, target)
    }

    fn do_rename(
        &mut self,
        from: (Ino, &OsStr),
        to: (Ino, &OsStr),
        ino: Ino,
        target: Option<Ino>,
    ) -> Result<(), Errno> {
        if target == Some(ino) {
            return Ok(());
        }
        let to_path = self.location(to.0).join(to.1);
        if let Some(t) = target {
            // The replaced inode may come back at a power loss: keep its bytes.
            self.backing.bury(&to_path, t)?;
        }
        fs::rename(self.location(ino), &to_path)?;
        self.ns
            .rename(from.0, from.1, to.0, to.1)
            .map_err(ns_errno)?;
        self.reap(&target.into_iter().collect::<Vec<_>>());
        Ok(())
    }

    /// Truncation through setattr, by handle or by path.
    pub(crate) fn truncate(
        &mut self,
        ino: Ino,
        fh: Option<u64>,
        len_bytes: u64,
    ) -> Result<(), Errno> {
        if self.ns.kind(ino) == Some(Kind::Dir) {
            return Err(Errno::EISDIR);
        }
        let file = match fh.map(|fh| self.file(fh)) {
            Some(Ok((_, file))) => file.try_clone()?,
            _ => fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.location(ino))?,
        };
        set_len(&mut self.files, ino, &file, len_bytes)
    }

    /// Files whose live data may differ from their durable data.
    pub(crate) fn dirty_files(&self) -> usize {
        self.files
            .iter()
            .filter(|(ino, data)| {
                fs::symlink_metadata(self.location(**ino)).is_ok_and(|md| data.is_dirty(md.len()))
            })
            .count()
    }
}
