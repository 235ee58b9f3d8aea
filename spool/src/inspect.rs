//! A read-only view of a spool directory, for operators during an incident.
//!
//! It never takes the lock, moves or deletes anything, so it is safe on a live spool:
//! files that disappear while it reads (drained meanwhile) are skipped, and a put in
//! progress shows up as a temp file. It reads with `std::fs` directly; it is a tool
//! for humans, not part of the spool's I/O path. [`summary`] reads only the listing,
//! [`oldest`] only the headers it shows, [`scan`] with [`Depth::Full`] every byte.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::entry::{FIXED_HEADER_BYTES, Header, MAX_ATTRIBUTE_BYTES};
use crate::layout::{
    self, DEAD_LETTER_DIR, ENTRIES_DIR, ERROR_SUFFIX, QUARANTINE_DIR, REASON_SUFFIX, TEMP_SUFFIX,
};
use crate::name::MAX_NAME_BYTES;

/// How much of each entry to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Only the header (at most 48 bytes, the name and 8 KiB of attributes per entry).
    Headers,
    /// The whole file: length and both checksums.
    Full,
}

/// One readable entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The entry's file name.
    pub file: String,
    /// Its header.
    pub header: Header,
}

/// A file set aside, with the note beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// The file name.
    pub file: String,
    /// Contents of its `.reason` or `.error` note (empty if missing).
    pub note: String,
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Valid entries, oldest (lowest sequence) first.
    pub entries: Vec<EntryInfo>,
    /// Entries that failed verification, with the reason (they would be quarantined
    /// at the next open).
    pub corrupt: Vec<(String, String)>,
    /// Puts in progress (or interrupted by a crash).
    pub temp_files: u64,
    /// Files in `quarantine/`.
    pub quarantined: Vec<SetAside>,
    /// Files in `dead-letter/`.
    pub dead_letters: Vec<SetAside>,
}

impl Scan {
    /// Total bytes of the valid entries' files.
    pub fn entry_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.header.file_bytes()).sum()
    }
}

/// What the directory listing alone says (entries written before 2026-12 have their
/// header read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Entry files.
    pub entries: u64,
    /// Their total size.
    pub entry_bytes: u64,
    /// Creation time of the oldest entry, ms since the Unix epoch.
    pub oldest_created_unix_ms: Option<u64>,
    /// Creation time of the newest entry.
    pub newest_created_unix_ms: Option<u64>,
    /// Puts in progress (or interrupted by a crash).
    pub temp_files: u64,
    /// Files in `entries/` that are not entries, or whose header cannot be read.
    pub unreadable: u64,
    /// Files in `quarantine/`.
    pub quarantined: u64,
    /// Files in `dead-letter/`.
    pub dead_letters: u64,
}

/// What a spool directory holds as its bounds count it: the entries in `entries/`
/// and the set-aside entries `requeue` could bring back, in files and bytes. The
/// maintenance commands open a spool with bounds no lower than this.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Entry files, pending and set aside.
    pub files: u64,
    /// Their total size (pending entries as their names say, set-aside ones as the
    /// file system does).
    pub bytes: u64,
}

/// What the spool in `dir` holds ([`Held`]); nothing when `dir` is not a spool yet.
pub fn held(dir: &Path) -> io::Result<Held> {
    if !dir.join(ENTRIES_DIR).is_dir() {
        return Ok(Held::default());
    }
    let pending = summary(dir)?;
    let mut held = Held {
        files: pending.entries,
        bytes: pending.entry_bytes,
    };
    for (sub, note_suffix) in [
        (QUARANTINE_DIR, REASON_SUFFIX),
        (DEAD_LETTER_DIR, ERROR_SUFFIX),
    ] {
        let sub = dir.join(sub);
        for file in file_names(&sub)?
            .iter()
            .filter(|f| !f.ends_with(note_suffix))
        {
            let bytes = match std::fs::metadata(sub.join(file)) {
                Ok(meta) => meta.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            held.files += 1;
            held.bytes += bytes;
        }
    }
    Ok(held)
}

fn entries_dir(dir: &Path) -> io::Result<PathBuf> {
    let entries_dir = dir.join(ENTRIES_DIR);
    if !entries_dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} is not a spool directory (no {ENTRIES_DIR}/)",
                dir.display()
            ),
        ));
    }
    Ok(entries_dir)
}

/// Summarizes the spool in `dir` from its listing: no entry is read except those
/// written before 2026-12, whose names do not carry their size and age.
pub fn summary(dir: &Path) -> io::Result<Summary> {
    let entries_dir = entries_dir(dir)?;
    let mut summary = Summary::default();
    for file in file_names(&entries_dir)? {
        if file.ends_with(TEMP_SUFFIX) {
            summary.temp_files += 1;
            continue;
        }
        let listed = match layout::parse_entry_name(&file) {
            Some(layout::EntryName {
                listed: Some(l), ..
            }) => l,
            Some(_) => match read(&entries_dir.join(&file), Depth::Headers)
                .ok()
                .and_then(|data| check(&file, data, Depth::Headers).ok())
            {
                Some(h) => layout::Listed {
                    created_unix_ms: h.created_unix_ms,
                    file_bytes: h.file_bytes(),
                    name_key: Some(crate::name::key(&h.name)),
                },
                None => {
                    summary.unreadable += 1;
                    continue;
                }
            },
            None => {
                summary.unreadable += 1;
                continue;
            }
        };
        summary.entries += 1;
        summary.entry_bytes += listed.file_bytes;
        let created = Some(listed.created_unix_ms);
        summary.oldest_created_unix_ms = summary.oldest_created_unix_ms.min(created).or(created);
        summary.newest_created_unix_ms = summary.newest_created_unix_ms.max(created);
    }
    summary.quarantined = set_aside(&dir.join(QUARANTINE_DIR), REASON_SUFFIX)?.len() as u64;
    summary.dead_letters = set_aside(&dir.join(DEAD_LETTER_DIR), ERROR_SUFFIX)?.len() as u64;
    Ok(summary)
}

/// The oldest `limit` entries with their headers, and how many entries there are
/// in all. Reads `limit` headers, not the whole backlog.
pub fn oldest(dir: &Path, limit: usize) -> io::Result<(Vec<EntryInfo>, u64)> {
    let entries_dir = entries_dir(dir)?;
    let mut names: Vec<(u64, String)> = file_names(&entries_dir)?
        .into_iter()
        .filter_map(|f| layout::parse_seq(&f).map(|seq| (seq, f)))
        .collect();
    names.sort();
    let total = names.len() as u64;
    let mut found = Vec::new();
    for (_, file) in names {
        if found.len() >= limit {
            break;
        }
        let header = match read(&entries_dir.join(&file), Depth::Headers) {
            Ok(data) => check(&file, data, Depth::Headers),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => Err(format!("read failed: {e}")),
        };
        if let Ok(header) = header {
            found.push(EntryInfo { file, header });
        }
    }
    Ok((found, total))
}

/// Scans the spool in `dir`.
pub fn scan(dir: &Path, depth: Depth) -> io::Result<Scan> {
    let entries_dir = entries_dir(dir)?;
    let mut scan = Scan::default();
    for file in file_names(&entries_dir)? {
        if file.ends_with(TEMP_SUFFIX) {
            scan.temp_files += 1;
            continue;
        }
        let path = entries_dir.join(&file);
        let verdict = match read(&path, depth) {
            Ok(data) => check(&file, data, depth),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => Err(format!("read failed: {e}")),
        };
        match verdict {
            Ok(header) => scan.entries.push(EntryInfo { file, header }),
            Err(reason) => scan.corrupt.push((file, reason)),
        }
    }
    scan.entries.sort_by_key(|e| e.header.seq);
    scan.quarantined = set_aside(&dir.join(QUARANTINE_DIR), REASON_SUFFIX)?;
    scan.dead_letters = set_aside(&dir.join(DEAD_LETTER_DIR), ERROR_SUFFIX)?;
    Ok(scan)
}

fn file_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(read_dir) => {
            for entry in read_dir {
                let entry = entry?;
                if entry.file_type()?.is_file() {
                    names.extend(entry.file_name().into_string().ok());
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    names.sort();
    Ok(names)
}

fn read(path: &Path, depth: Depth) -> io::Result<Bytes> {
    match depth {
        Depth::Full => std::fs::read(path).map(Bytes::from),
        Depth::Headers => {
            use std::io::Read;
            let mut buf =
                Vec::with_capacity(FIXED_HEADER_BYTES + MAX_NAME_BYTES + MAX_ATTRIBUTE_BYTES);
            std::fs::File::open(path)?
                .take((FIXED_HEADER_BYTES + MAX_NAME_BYTES + MAX_ATTRIBUTE_BYTES) as u64)
                .read_to_end(&mut buf)?;
            Ok(Bytes::from(buf))
        }
    }
}

/// The checks `Spool::open` makes ([`layout::verify`]), or those of them that need
/// only the header.
fn check(file: &str, data: Bytes, depth: Depth) -> Result<Header, String> {
    match depth {
        Depth::Full => layout::verify(file, data).map(|(h, _)| h),
        Depth::Headers => layout::verify_header(file, &data),
    }
    .map_err(|e| e.to_string())
}

fn set_aside(dir: &Path, note_suffix: &str) -> io::Result<Vec<SetAside>> {
    let names = file_names(dir)?;
    Ok(names
        .iter()
        .filter(|n| !n.ends_with(note_suffix))
        .map(|file| SetAside {
            file: file.clone(),
            note: std::fs::read_to_string(dir.join(format!("{file}{note_suffix}")))
                .unwrap_or_default()
                .trim_end()
                .to_string(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Spool, SpoolConfig};

    #[tokio::test]
    async fn scan_sees_a_live_spool_without_taking_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), SpoolConfig::default())
            .await
            .unwrap();
        spool.put("b", Bytes::from_static(b"22")).await.unwrap();
        spool.put("a", Bytes::from_static(b"1")).await.unwrap();
        let claim = spool.claim_oldest().unwrap();
        spool.dead_letter(claim, "HTTP 403").await.unwrap();
        std::fs::write(
            dir.path()
                .join(ENTRIES_DIR)
                .join("00000000000000000009.tmp"),
            b"",
        )
        .unwrap();

        let full = scan(dir.path(), Depth::Full).unwrap();
        assert_eq!(full.entries.len(), 1);
        assert_eq!(full.entries[0].header.name, "a");
        assert_eq!(full.temp_files, 1);
        assert_eq!(full.dead_letters.len(), 1);
        assert_eq!(full.dead_letters[0].note, "HTTP 403");
        assert_eq!(full.entry_bytes(), crate::entry::file_bytes(1, 0, 1));
        assert_eq!(scan(dir.path(), Depth::Headers).unwrap(), full);
        // The spool still works: the scan held no lock.
        spool.put("c", Bytes::new()).await.unwrap();
    }

    #[tokio::test]
    async fn full_depth_finds_payload_corruption_that_headers_miss() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), SpoolConfig::default())
            .await
            .unwrap();
        let receipt = spool
            .put("a", Bytes::from_static(b"payload"))
            .await
            .unwrap();
        let path = dir.path().join(ENTRIES_DIR).join(layout::entry_file_name(
            receipt.seq,
            receipt.created_unix_ms,
            receipt.file_bytes,
            crate::name::key("a"),
        ));
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, bytes).unwrap();

        assert!(scan(dir.path(), Depth::Headers).unwrap().corrupt.is_empty());
        let full = scan(dir.path(), Depth::Full).unwrap();
        assert_eq!(full.corrupt.len(), 1);
        assert!(
            full.corrupt[0].1.contains("payload checksum"),
            "{:?}",
            full.corrupt
        );
    }

    #[tokio::test]
    async fn verify_reports_an_entry_that_the_spool_would_quarantine() {
        // Intact bytes and checksums, but an object name no store accepts: the
        // header check alone used to pass it while open quarantined it.
        let dir = tempfile::tempdir().unwrap();
        drop(
            Spool::open(dir.path(), SpoolConfig::default())
                .await
                .unwrap(),
        );
        let mode = crate::WriteMode::CreateIfAbsent;
        let bytes = crate::entry::encode(1, 0, "a\nb", mode, &[], b"payload");
        let file = layout::entry_file_name(1, 0, bytes.len() as u64, crate::name::key("a\nb"));
        std::fs::write(dir.path().join(ENTRIES_DIR).join(&file), &bytes).unwrap();

        for depth in [Depth::Headers, Depth::Full] {
            let scan = scan(dir.path(), depth).unwrap();
            assert_eq!(scan.corrupt.len(), 1, "{depth:?}: {scan:?}");
            assert!(scan.corrupt[0].1.contains("name"), "{:?}", scan.corrupt);
        }
        let (spool, _) = Spool::open_with(
            dir.path(),
            SpoolConfig::default(),
            std::sync::Arc::new(crate::StdDisk),
            std::sync::Arc::new(crate::SystemClock),
            crate::Metrics::default(),
        )
        .await
        .unwrap();
        // Open indexes it from its name; the read that would upload it refuses it.
        let claim = spool.claim_oldest().unwrap();
        let err = spool.read(&claim).await.unwrap_err();
        assert!(err.is_final() && err.to_string().contains("name"), "{err}");
    }

    #[test]
    fn a_directory_that_is_not_a_spool_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = scan(dir.path(), Depth::Headers).unwrap_err();
        assert!(err.to_string().contains("not a spool directory"), "{err}");
    }
}
