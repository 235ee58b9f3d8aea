//! The names a directory listing found, in one buffer: a million entries are two
//! allocations, not a million. Open lists the entries directory of a whole backlog;
//! as one `String` per name, freeing them was a quarter of open's time at 100k
//! entries (docs/benchmarks-log.md, issue 31). On Linux the listing itself is read
//! with `getdents64` into one reused buffer, without `std::fs::ReadDir`'s two
//! allocations per name (the entry's `CString`, and the `OsString` of its name).

use std::io;
use std::path::Path;

/// File names, in the order they were pushed; and apart, the names that are not
/// UTF-8 (no spool file has one, so each is a stray to set aside and report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    /// Every name, one after another.
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<usize>,
    /// Names that are not UTF-8, as the file system gave them.
    not_utf8: Vec<std::ffi::OsString>,
}

impl Names {
    /// Empty, with room for `names` names of `text_bytes` bytes in all: for a
    /// listing whose size is known before it is read (a listing of a million
    /// names otherwise doubles its buffers about twenty times).
    pub fn with_capacity(names: usize, text_bytes: usize) -> Names {
        Names {
            text: String::with_capacity(text_bytes),
            ends: Vec::with_capacity(names),
            not_utf8: Vec::new(),
        }
    }

    /// Adds `name` at the end.
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Name `i`, in the order pushed.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        Some(&self.text[start..end])
    }

    /// The names, in the order pushed.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).expect("i < len"))
    }

    /// The names as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_string).collect()
    }

    /// The names found that are not UTF-8 (left out of the others).
    pub fn not_utf8(&self) -> &[std::ffi::OsString] {
        &self.not_utf8
    }

    /// Adds a name that is not UTF-8.
    pub fn push_not_utf8(&mut self, name: std::ffi::OsString) {
        self.not_utf8.push(name);
    }
}

impl Names {
    /// The names of the files in `dir` (not of its subdirectories), in the order
    /// the file system lists them; names that are not UTF-8 apart
    /// ([`Names::not_utf8`]), as no spool file has one.
    #[cfg(target_os = "linux")]
    pub fn of_dir(dir: &Path) -> io::Result<Names> {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
        /// glibc's `readdir` buffer size: about 500 entry names per system call.
        const LISTING_BUFFER_BYTES: usize = 32 * 1024;
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut buffer = Vec::with_capacity(LISTING_BUFFER_BYTES);
        let mut listing = RawDir::new(&fd, buffer.spare_capacity_mut());
        let mut names = Names::default();
        while let Some(entry) = listing.next() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            // Some file systems do not say the type in the listing; ask them.
            let file_type = match entry.file_type() {
                FileType::Unknown => FileType::from_raw_mode(
                    rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)?.st_mode,
                ),
                known => known,
            };
            if file_type == FileType::Directory {
                continue;
            }
            match std::str::from_utf8(name) {
                Ok(name) => names.push(name),
                Err(_) => {
                    use std::os::unix::ffi::OsStrExt as _;
                    let name = std::ffi::OsStr::from_bytes(name).to_owned();
                    names.push_not_utf8(name);
                }
            }
        }
        Ok(names)
    }

    /// The names of the files in `dir` (not of its subdirectories); names that are
    /// not UTF-8 apart ([`Names::not_utf8`]), as no spool file has one.
    #[cfg(not(target_os = "linux"))]
    pub fn of_dir(dir: &Path) -> io::Result<Names> {
        let mut names = Names::default();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                continue;
            }
            match entry.file_name().to_str() {
                Some(name) => names.push(name),
                None => names.push_not_utf8(entry.file_name()),
            }
        }
        Ok(names)
    }
}

impl<S: AsRef<str>> FromIterator<S> for Names {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> Self {
        let mut all = Names::default();
        for name in names {
            all.push(name.as_ref());
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names sized beforehand hold what they were sized for without growing.
    #[test]
    fn a_listing_sized_beforehand_does_not_grow() {
        let mut names = Names::with_capacity(3, 7);
        let (text, ends) = (names.text.as_ptr(), names.ends.as_ptr());
        for name in ["a", "bc", "déj"] {
            names.push(name);
        }
        assert_eq!(names.to_vec(), ["a", "bc", "déj"]);
        assert_eq!((names.text.as_ptr(), names.ends.as_ptr()), (text, ends));
    }

    #[test]
    fn names_come_back_as_pushed_empty_ones_included() {
        let names: Names = ["a", "", "bc", "déjà"].into_iter().collect();
        assert_eq!(names.len(), 4);
        assert_eq!(names.to_vec(), ["a", "", "bc", "déjà"]);
        assert_eq!((names.get(2), names.get(4)), (Some("bc"), None));
        assert!(Names::default().is_empty());
    }

    /// What open relies on from a listing: every file (a symlink is one), no
    /// directory, no `.` or `..`, no name that is not UTF-8, and a missing
    /// directory's error rather than an empty listing.
    #[test]
    #[cfg(unix)]
    fn a_directory_lists_its_files_by_utf8_name_and_not_its_subdirectories() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<String> = (0..1500).map(|i| format!("{i:020}.1.2.entry")).collect();
        for name in &files {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("a directory")).unwrap();
        std::os::unix::fs::symlink("a directory", dir.path().join("déjà vu")).unwrap();
        std::fs::write(
            dir.path()
                .join(std::ffi::OsStr::from_bytes(b"not \xff utf-8")),
            b"",
        )
        .unwrap();

        let mut listed = Names::of_dir(dir.path()).unwrap().to_vec();
        listed.sort();
        let mut expected = files;
        expected.push("déjà vu".to_string());
        expected.sort();
        assert_eq!(listed, expected);

        let missing = Names::of_dir(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}
