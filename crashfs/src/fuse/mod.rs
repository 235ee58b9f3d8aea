//! The FUSE side: [`CrashFs`] answers the kernel's requests from [`state::State`],
//! one at a time under its lock. This file only translates between fuser's types and
//! the state's operations; what each operation means for the model is in `state.rs`.
//!
//! Every file is opened with `FOPEN_DIRECT_IO` and every entry and attribute is
//! given a time to live of zero, and the kernel's writeback cache is never asked
//! for: each write, fsync and lookup reaches crashfs when the program makes it, and
//! nothing the kernel cached outlives a power loss.

pub(crate) mod backing;
mod power;
pub(crate) mod state;

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use nix::sys::time::TimeSpec;

use crate::faults::OpKind;
use crate::model::{Ino, Kind};
use state::{State, ns_errno};

/// How long the kernel may cache an entry or attributes: not at all, so that a
/// lookup after a power loss sees the durable state.
pub(crate) const TTL: Duration = Duration::ZERO;

/// The file system fuser serves.
#[derive(Debug)]
pub(crate) struct CrashFs {
    state: Arc<Mutex<State>>,
}

impl CrashFs {
    pub(crate) fn new(state: Arc<Mutex<State>>) -> Self {
        Self { state }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn system_time(secs: i64, nanos: i64) -> SystemTime {
    let nanos = Duration::from_nanos(nanos.clamp(0, 999_999_999) as u64);
    match u64::try_from(secs) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos,
    }
}

/// The attributes the kernel sees: the backing file's, under crashfs's inode number.
fn attr(ino: Ino, md: &fs::Metadata) -> FileAttr {
    let kind = if md.is_dir() {
        FileType::Directory
    } else {
        FileType::RegularFile
    };
    FileAttr {
        ino: INodeNo(ino),
        size: md.len(),
        blocks: md.blocks(),
        atime: system_time(md.atime(), md.atime_nsec()),
        mtime: system_time(md.mtime(), md.mtime_nsec()),
        ctime: system_time(md.ctime(), md.ctime_nsec()),
        crtime: system_time(md.ctime(), md.ctime_nsec()),
        kind,
        perm: (md.mode() & 0o7777) as u16,
        nlink: if md.is_dir() { 2 } else { 1 },
        uid: md.uid(),
        gid: md.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
    }
}

fn time_spec(time: Option<TimeOrNow>) -> TimeSpec {
    match time {
        None => TimeSpec::UTIME_OMIT,
        Some(TimeOrNow::Now) => TimeSpec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => TimeSpec::from_duration(d),
            Err(_) => TimeSpec::new(0, 0), // before 1970: the epoch
        },
    }
}

/// A parsed setattr request.
struct SetAttr {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

impl State {
    fn entry(&self, ino: Ino) -> Result<FileAttr, Errno> {
        Ok(attr(ino, &self.metadata(ino, None)?))
    }

    fn lookup_entry(&self, parent: Ino, name: &OsStr) -> Result<FileAttr, Errno> {
        let ino = self.ns.lookup(parent, name).map_err(ns_errno)?;
        self.entry(ino)
    }

    fn setattr(&mut self, ino: Ino, fh: Option<u64>, set: &SetAttr) -> Result<FileAttr, Errno> {
        if self.ns.kind(ino).is_none() && fh.is_none() {
            return Err(Errno::ENOENT);
        }
        self.fault(OpKind::Setattr)?;
        if let Some(size) = set.size {
            self.truncate(ino, fh, size)?;
        }
        let path = self.location(ino);
        if let Some(mode) = set.mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            std::os::unix::fs::chown(&path, set.uid, set.gid)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let file = fs::File::open(&path)?;
            nix::sys::stat::futimens(&file, &time_spec(set.atime), &time_spec(set.mtime))
                .map_err(|e| Errno::from_i32(e as i32))?;
        }
        Ok(attr(ino, &self.metadata(ino, fh)?))
    }
}

fn statfs(root: &Path) -> io::Result<nix::sys::statvfs::Statvfs> {
    nix::sys::statvfs::statvfs(root).map_err(io::Error::from)
}

impl Filesystem for CrashFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lock().lookup_entry(parent.0, name) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().metadata(ino.0, fh.map(|f| f.0)) {
            Ok(md) => reply.attr(&TTL, &attr(ino.0, &md)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.lock().setattr(ino.0, fh.map(|f| f.0), &set) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        match state
            .mkdir(parent.0, name, mode & !umask, (req.uid(), req.gid()))
            .and_then(|ino| state.entry(ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().unlink(parent.0, name, Kind::File) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().unlink(parent.0, name, Kind::Dir) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            reply.error(Errno::EINVAL); // RENAME_EXCHANGE, RENAME_WHITEOUT
            return;
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        match self
            .lock()
            .rename((parent.0, name), (newparent.0, newname), noreplace)
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().open(ino.0, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.lock().read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.lock().write(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().release(fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.lock().fsync(fh.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.lock().readdir(fh.0, offset) {
            Ok(entries) => {
                for (i, (name, ino, kind)) in entries.into_iter().enumerate() {
                    let next = offset + i as u64 + 1;
                    if reply.add(INodeNo(ino), next, file_type(kind), &name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.lock().release(fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.lock().fsyncdir(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = self.lock().backing.root().to_path_buf();
        match statfs(&root) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(e) => reply.error(e.into()),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok(); // `default_permissions`: the kernel checks modes itself
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.lock();
        let created = state
            .create(
                parent.0,
                name,
                mode & !umask & 0o7777,
                (req.uid(), req.gid()),
            )
            .and_then(|(ino, fh)| Ok((state.entry(ino)?, fh)));
        match created {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(e),
        }
    }
}
