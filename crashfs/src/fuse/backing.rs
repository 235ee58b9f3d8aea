//! The backing directory: where every inode's live bytes are, and how a power loss
//! rewrites it.
//!
//! - An inode with a live name is at that path under the backing root, so the
//!   backing directory is always the live view (readable with any tool).
//! - An inode removed from the namespace but still needed (a power loss may bring
//!   its name back, or a process holds it open) is moved to
//!   `.crashfs/graveyard/<ino>` instead of being deleted; it is deleted once
//!   nothing needs it. The name `.crashfs` in the root is reserved.
//! - A power loss builds the surviving tree in `.crashfs/rebuild/` (directories made
//!   anew, files moved there by rename, never copied), moves everything else in the
//!   root to `.crashfs/trash/`, moves the rebuilt tree into the root, and deletes
//!   `.crashfs`.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::model::{FileData, Ino, Kind, Namespace};

/// The reserved name, in the backing root, of crashfs's own directory.
pub(crate) const STATE_DIR: &str = ".crashfs";

/// The backing directory.
#[derive(Debug, Clone)]
pub(crate) struct Backing {
    root: PathBuf,
}

/// Why a backing directory cannot be served.
#[derive(Debug)]
pub(crate) enum ImportError {
    Io(PathBuf, io::Error),
    Unsupported(PathBuf, &'static str),
}

impl Backing {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    fn graveyard(&self) -> PathBuf {
        self.state_dir().join("graveyard")
    }

    /// Where a removed inode waits.
    pub(crate) fn grave(&self, ino: Ino) -> PathBuf {
        self.graveyard().join(ino.to_string())
    }

    /// Where `ino`'s bytes are now.
    pub(crate) fn location(&self, ns: &Namespace, ino: Ino) -> PathBuf {
        match ns.path(ino) {
            Some(path) => self.root.join(path),
            None => self.grave(ino),
        }
    }

    /// Whether `name` in the root is crashfs's own.
    pub(crate) fn is_reserved(parent: Ino, name: &OsStr) -> bool {
        parent == crate::model::ROOT && name == STATE_DIR
    }

    /// Moves `from` (a live path) to `ino`'s grave.
    pub(crate) fn bury(&self, from: &Path, ino: Ino) -> io::Result<()> {
        fs::create_dir_all(self.graveyard())?;
        fs::rename(from, self.grave(ino))
    }

    /// Deletes `ino`'s grave, if it has one.
    pub(crate) fn reap(&self, ino: Ino) {
        let grave = self.grave(ino);
        let removed = match fs::symlink_metadata(&grave) {
            Ok(md) if md.is_dir() => fs::remove_dir_all(&grave),
            Ok(_) => fs::remove_file(&grave),
            Err(_) => Ok(()),
        };
        if let Err(e) = removed {
            eprintln!("crashfs: cannot delete {}: {e}", grave.display());
        }
    }

    /// Reads the backing tree into a namespace in which everything is durable, and
    /// each file's data; deletes a `.crashfs` left by an earlier run.
    pub(crate) fn import(
        &self,
        block_bytes: u64,
    ) -> Result<(Namespace, Vec<(Ino, FileData)>), ImportError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |e| ImportError::Io(path, e)
        };
        let state = self.state_dir();
        if fs::symlink_metadata(&state).is_ok() {
            fs::remove_dir_all(&state).map_err(io_err(&state))?;
        }
        let md = fs::metadata(&self.root).map_err(io_err(&self.root))?;
        if !md.is_dir() {
            return Err(ImportError::Unsupported(
                self.root.clone(),
                "a backing path that is not a directory",
            ));
        }
        let mut ns = Namespace::new();
        let mut files = Vec::new();
        let mut queue = vec![(crate::model::ROOT, self.root.clone())];
        while let Some((dir, path)) = queue.pop() {
            let mut entries: Vec<(OsString, fs::Metadata)> = Vec::new();
            for entry in fs::read_dir(&path).map_err(io_err(&path))? {
                let entry = entry.map_err(io_err(&path))?;
                let md = fs::symlink_metadata(entry.path()).map_err(io_err(&entry.path()))?;
                entries.push((entry.file_name(), md));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, md) in entries {
                let child = path.join(&name);
                let kind = if md.is_dir() {
                    Kind::Dir
                } else if md.is_file() && md.nlink() == 1 {
                    Kind::File
                } else if md.is_file() {
                    return Err(ImportError::Unsupported(child, "a file with hard links"));
                } else {
                    return Err(ImportError::Unsupported(
                        child,
                        "a symbolic link or special file",
                    ));
                };
                let ino = ns
                    .add_durable(dir, &name, kind)
                    .map_err(|e| ImportError::Io(child.clone(), io::Error::other(e)))?;
                match kind {
                    Kind::Dir => queue.push((ino, child)),
                    Kind::File => files.push((ino, FileData::durable(md.len(), block_bytes))),
                }
            }
        }
        Ok((ns, files))
    }

    /// Rewrites the backing directory to the surviving tree. `old` gives where each
    /// surviving inode's bytes are now; `ns` is the namespace after the power loss
    /// (its live view is the surviving tree).
    pub(crate) fn rebuild(
        &self,
        ns: &Namespace,
        old: &std::collections::BTreeMap<Ino, PathBuf>,
    ) -> io::Result<()> {
        let state = self.state_dir();
        let staging = state.join("rebuild");
        let trash = state.join("trash");
        for dir in [&staging, &trash] {
            if fs::symlink_metadata(dir).is_ok() {
                fs::remove_dir_all(dir)?;
            }
            fs::create_dir_all(dir)?;
        }
        // Parents before children: a directory's path is shorter than its entries'.
        let mut survivors: Vec<(PathBuf, Ino, Kind)> = ns
            .inodes()
            .into_iter()
            .filter(|(ino, _)| *ino != crate::model::ROOT)
            .filter_map(|(ino, kind)| Some((ns.path(ino)?, ino, kind)))
            .collect();
        survivors.sort_by_key(|(path, _, _)| path.components().count());
        for (path, ino, kind) in &survivors {
            let to = staging.join(path);
            let from = old
                .get(ino)
                .ok_or_else(|| io::Error::other(format!("inode {ino} has no backing location")))?;
            match kind {
                Kind::Dir => {
                    fs::create_dir(&to)?;
                    if let Ok(md) = fs::metadata(from) {
                        fs::set_permissions(&to, fs::Permissions::from_mode(md.mode()))?;
                        std::os::unix::fs::chown(&to, Some(md.uid()), Some(md.gid()))?;
                    }
                }
                Kind::File => fs::rename(from, &to)?,
            }
        }
        for entry in fs::read_dir(&self.root)? {
            let entry = entry?;
            if entry.file_name() != STATE_DIR {
                fs::rename(entry.path(), trash.join(entry.file_name()))?;
            }
        }
        for entry in fs::read_dir(&staging)? {
            let entry = entry?;
            fs::rename(entry.path(), self.root.join(entry.file_name()))?;
        }
        fs::remove_dir_all(&state)
    }
}
