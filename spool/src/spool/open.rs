//! Opening a spool: the only time its directory is listed (and, after a failed
//! directory sync, when it reopens itself in place: [`super::recover`]).
//!
//! In order: create the directories (durably), take the lock, list the three
//! directories, delete temp files of interrupted puts, index every entry from its
//! file name (entries written before 2026-12-06 have their header read instead), move
//! stray files to `quarantine/` with the reason, and continue the sequence after
//! every number still on disk. Payloads are not read here: the drainer verifies
//! every entry in full before it uploads it, so a corrupt entry is still never
//! uploaded, and a restart during an outage takes a listing, not a read of the
//! backlog.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;

use super::aside::move_with_note;
use super::index::Index;
use super::layout::{
    self, DEAD_LETTER_DIR, ENTRIES_DIR, ERROR_SUFFIX, LOCK_FILE, QUARANTINE_DIR, REASON_SUFFIX,
    TEMP_SUFFIX,
};
use super::{Inner, Meta, Naming, Spool, SpoolConfig, SpoolDir, State};
use crate::clock::Clock;
use crate::disk::{DirPlan, Disk, DiskLock, Names, PrepareStep, Prepared};
use crate::error::OpenError;
use crate::metrics::Metrics;

/// How many headers of entries named before 2026-12-06 open reads at once.
const OPEN_READ_CONCURRENCY: usize = 32;

/// What [`Spool::open`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenReport {
    /// Entries indexed.
    pub entries: u64,
    /// Leftover temporary files (puts interrupted by a crash) deleted.
    pub temp_files_removed: u64,
    /// Files moved to quarantine, with the reason.
    pub quarantined: Vec<(String, String)>,
}

/// The spool's three directories.
pub(super) struct Dirs {
    pub(super) entries: PathBuf,
    pub(super) quarantine: PathBuf,
    pub(super) dead_letter: PathBuf,
}

impl Dirs {
    pub(super) fn of(dir: &Path) -> Self {
        Self {
            entries: dir.join(ENTRIES_DIR),
            quarantine: dir.join(QUARANTINE_DIR),
            dead_letter: dir.join(DEAD_LETTER_DIR),
        }
    }
}

/// What a scan of the directories found: the index and what else is on disk.
pub(super) struct Scan {
    pub(super) index: BTreeMap<u64, Meta>,
    pub(super) quarantine: Vec<String>,
    pub(super) dead_letter: Vec<String>,
    pub(super) report: OpenReport,
}

impl Scan {
    /// Sequence numbers continue after every one still on disk, dead letters and
    /// quarantined entries included, so a number is never reused while its file
    /// exists anywhere in the directory.
    pub(super) fn next_seq(&self) -> u64 {
        (self.index.last_key_value().map(|(&seq, _)| seq).into_iter())
            .chain(self.dead_letter.iter().filter_map(|n| layout::parse_seq(n)))
            .chain(self.quarantine.iter().filter_map(|n| layout::parse_seq(n)))
            .max()
            .map_or(1, |max| max + 1)
    }
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> OpenError {
    let path = path.to_path_buf();
    move |source| OpenError::Io { op, path, source }
}

impl Spool {
    /// Opens the spool in `dir` through the given seams, and reports what open found.
    ///
    /// Open takes the lock, deletes temporary files left by interrupted puts, indexes
    /// every entry, moves files that are not entries to `quarantine/` with the
    /// reason, and builds the index. This is the only time the directory is listed.
    pub async fn open_with(
        dir: &Path,
        config: SpoolConfig,
        disk: Arc<dyn Disk>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
    ) -> Result<(Spool, OpenReport), OpenError> {
        config.validate()?;
        let dirs = Dirs::of(dir);
        let (lock, listings) = prepare(&*disk, dir, &dirs).await?;
        let scan = index(&disk, &dirs, listings, &metrics).await?;
        let next_seq = scan.next_seq();
        let mut state = State {
            next_seq,
            index: Index::new(scan.index),
            reserved_files: 0,
            reserved_bytes: 0,
            broken: None,
            recovering: false,
            disk_refused: None,
            quarantined_files: layout::count_data_files(&scan.quarantine, REASON_SUFFIX),
            dead_letter_files: layout::count_data_files(&scan.dead_letter, ERROR_SUFFIX),
            unsynced_removes: 0,
            removals: Vec::new(),
            removing: Vec::new(),
            changes_since_index_check: 0,
        };
        state.check(&config);
        state.check_index();
        let mut report = scan.report;
        report.entries = state.index.len() as u64;
        let spool = Spool {
            inner: Arc::new(Inner {
                entries: SpoolDir::new(dirs.entries),
                quarantine: SpoolDir::new(dirs.quarantine),
                dead_letter: SpoolDir::new(dirs.dead_letter),
                config,
                disk,
                clock,
                metrics,
                state: Mutex::new(state),
                changed: tokio::sync::Notify::new(),
                withdrawals: tokio::sync::Notify::new(),
                store_took: Default::default(),
                removals_wake: Arc::new(tokio::sync::Notify::new()),
                _lock: lock,
            }),
        };
        tokio::spawn(super::claim::run_remover(
            Arc::downgrade(&spool.inner),
            spool.inner.removals_wake.clone(),
        ));
        Ok((spool, report))
    }
}

/// Creates the three directories (the disk makes every directory it creates
/// durable), syncs `dir` so that they are durable in it even if it existed, takes
/// the lock and lists the directories: one call to the disk.
async fn prepare(
    disk: &dyn Disk,
    dir: &Path,
    dirs: &Dirs,
) -> Result<(DiskLock, Listings), OpenError> {
    let plan = DirPlan {
        dir: dir.to_path_buf(),
        create: vec![
            dirs.entries.clone(),
            dirs.quarantine.clone(),
            dirs.dead_letter.clone(),
        ],
        lock: dir.join(LOCK_FILE),
        list: vec![
            dirs.quarantine.clone(),
            dirs.dead_letter.clone(),
            dirs.entries.clone(),
        ],
    };
    let Prepared { lock, listings } = disk.prepare(&plan).await.map_err(|e| {
        if e.step == PrepareStep::Lock && e.source.kind() == io::ErrorKind::WouldBlock {
            OpenError::Locked {
                dir: dir.to_path_buf(),
                message: e.source.to_string(),
            }
        } else {
            io_err(e.step.as_str(), &e.path)(e.source)
        }
    })?;
    let [quarantine, dead_letter, entries] = <[Names; 3]>::try_from(listings).map_err(|l| {
        io_err("list", dir)(io::Error::other(format!(
            "{} listings for 3 directories",
            l.len()
        )))
    })?;
    Ok((
        lock,
        Listings {
            quarantine,
            dead_letter,
            entries,
        },
    ))
}

/// The names in the spool's three directories.
pub(super) struct Listings {
    quarantine: Names,
    dead_letter: Names,
    entries: Names,
}

impl Listings {
    /// Lists the three directories (a reopen in place, after the lock is held).
    pub(super) async fn of(disk: &dyn Disk, dirs: &Dirs) -> Result<Listings, OpenError> {
        let list = |dir: &Path| {
            let dir = dir.to_path_buf();
            async move { disk.list(&dir).await.map_err(io_err("list", &dir)) }
        };
        Ok(Listings {
            quarantine: list(&dirs.quarantine).await?,
            dead_letter: list(&dirs.dead_letter).await?,
            entries: list(&dirs.entries).await?,
        })
    }
}

/// The names in `entries/`, by what they are.
#[derive(Default)]
struct EntryNames {
    /// Puts interrupted by a crash: deleted.
    temps: Vec<String>,
    /// Entry files named with their sequence number, creation time, size and
    /// name key: indexed from the name alone (the name's place in the listing
    /// kept, should another file have the same sequence number).
    listed: Vec<ListedName>,
    /// Entry files named as before 2026-12-06 (without the name key): their header
    /// is read.
    legacy: Vec<String>,
    /// Anything else: quarantined.
    strays: Vec<String>,
}

fn sort_entry_names(names: &Names) -> EntryNames {
    let mut sorted = EntryNames::default();
    sorted.listed.reserve(names.len());
    for (i, name) in names.iter().enumerate() {
        if name.ends_with(TEMP_SUFFIX) {
            sorted.temps.push(name.to_string());
            continue;
        }
        match layout::parse_entry_name(name) {
            Some(layout::EntryName {
                seq,
                listed: Some(listed),
            }) if listed.name_key.is_some() => sorted.listed.push((seq, listed, i)),
            Some(_) => sorted.legacy.push(name.to_string()),
            None => sorted.strays.push(name.to_string()),
        }
    }
    sorted
}

/// From the directories' listings: deletes temp files, indexes the entries and
/// quarantines what is not an entry.
pub(super) async fn index(
    disk: &Arc<dyn Disk>,
    dirs: &Dirs,
    listings: Listings,
    metrics: &Metrics,
) -> Result<Scan, OpenError> {
    let mut quarantine = listings.quarantine.to_vec();
    let dead_letter = listings.dead_letter.to_vec();
    let entries = listings.entries;
    let names = sort_entry_names(&entries);
    let mut report = OpenReport::default();
    for name in &names.temps {
        let path = dirs.entries.join(name);
        disk.remove(&path).await.map_err(io_err("remove", &path))?;
        report.temp_files_removed += 1;
    }
    let mut to_quarantine: Vec<(String, String)> = names
        .strays
        .into_iter()
        .map(|name| (name, "not a spool entry file name".to_string()))
        .collect();
    let mut index = index_listed(names.listed, &entries, &mut to_quarantine);
    for (name, header) in read_legacy(disk, &dirs.entries, names.legacy).await? {
        let parsed = layout::parse_entry_name(&name).expect("sorted as an entry name");
        let seq = parsed.seq;
        let naming = match parsed.listed {
            None => Naming::Legacy,
            Some(_) => Naming::Unkeyed,
        };
        match header {
            Ok(_) if index.contains_key(&seq) => to_quarantine.push((name, same_seq())),
            Ok(listed) => {
                index.insert(seq, meta(listed, naming));
            }
            Err(reason) => to_quarantine.push((name, reason)),
        }
    }
    // A name that is not UTF-8 is no spool file's: set aside, shown with U+FFFD.
    let mut set_aside: Vec<(OsString, String)> = (to_quarantine.into_iter())
        .map(|(n, r)| (n.into(), r))
        .collect();
    set_aside.extend(entries.not_utf8().iter().map(|name| {
        let reason = format!(
            "the file name is not UTF-8 (it reads {:?})",
            name.to_string_lossy()
        );
        (name.clone(), reason)
    }));
    quarantine_all(&**disk, dirs, &mut quarantine, &set_aside, metrics).await?;
    report.quarantined = (set_aside.into_iter())
        .map(|(name, reason)| (name.to_string_lossy().into_owned(), reason))
        .collect();
    Ok(Scan {
        index,
        quarantine,
        dead_letter,
        report,
    })
}

/// An entry file indexed from its name: its sequence number, what the name says,
/// and the name's place in the listing.
type ListedName = (u64, layout::Listed, usize);

/// The index of the entries named with what it needs, built in one go (in sequence
/// order, then bulk-built) rather than by one insert per entry in the directory's
/// hash order: full leaves, a third less memory per entry. Two files with one
/// sequence number (only a hand can make them) keep the first by name; the other is
/// set aside.
fn index_listed(
    listed: Vec<ListedName>,
    names: &Names,
    to_quarantine: &mut Vec<(String, String)>,
) -> BTreeMap<u64, Meta> {
    let entries = placed_by_seq(&listed).unwrap_or_else(|| {
        let name = |i: usize| names.get(i).expect("a place in the listing");
        let (kept, set_aside) = sorted_deduplicated_by_seq(listed, name);
        to_quarantine.extend(
            set_aside
                .iter()
                .map(|&(_, _, i)| (name(i).to_string(), same_seq())),
        );
        (kept.into_iter())
            .map(|(seq, listed, _)| (seq, meta(listed, Naming::Keyed)))
            .collect()
    });
    // `BTreeMap::from_iter` takes over a `Vec`'s buffer as it is.
    BTreeMap::from_iter(entries)
}

/// Most slots per entry [`placed_by_seq`] gives a placement by sequence number:
/// a backlog's numbers are nearly consecutive (the drainer takes the oldest first),
/// so its slots are about one per entry. The slots (32 bytes each) live until the
/// index is built.
const PLACEMENT_SLOTS_PER_ENTRY: u64 = 2;

/// The entries in sequence order, each put into the slot of its number in one pass
/// and the empty slots then left out in place, if their numbers are dense and none
/// is repeated; otherwise `None`, and [`sorted_deduplicated_by_seq`] orders them.
///
/// A directory lists in its own hash order. Sorting it was a quarter of what open
/// added to the listing at 1M entries (docs/benchmarks-log.md, issue 31).
fn placed_by_seq(listed: &[ListedName]) -> Option<Vec<(u64, Meta)>> {
    let (min, max) = (listed.iter()).fold((u64::MAX, 0), |(min, max), &(seq, ..)| {
        (min.min(seq), max.max(seq))
    });
    let slots = max.checked_sub(min)?.saturating_add(1);
    if slots > PLACEMENT_SLOTS_PER_ENTRY.saturating_mul(listed.len() as u64) {
        return None;
    }
    let mut placed: Vec<Option<(u64, Meta)>> = vec![None; usize::try_from(slots).ok()?];
    for &(seq, listed, _) in listed {
        let slot = &mut placed[(seq - min) as usize];
        if slot.is_some() {
            return None;
        }
        *slot = Some((seq, meta(listed, Naming::Keyed)));
    }
    // `filter_map` keeps the buffer (`flatten` would collect into a new one).
    #[allow(clippy::filter_map_identity)]
    let entries = placed.into_iter().filter_map(|slot| slot).collect();
    Some(entries)
}

/// `listed` sorted by sequence number, one entry per number (the first by name),
/// and the entries that share a number with a kept one, in order of (number, name).
fn sorted_deduplicated_by_seq<'n>(
    mut listed: Vec<ListedName>,
    name: impl Fn(usize) -> &'n str,
) -> (Vec<ListedName>, Vec<ListedName>) {
    listed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| name(a.2).cmp(name(b.2))));
    let mut set_aside = Vec::new();
    listed.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            set_aside.push(*later);
        }
        same
    });
    (listed, set_aside)
}

fn same_seq() -> String {
    "another entry file has the same sequence number".to_string()
}

/// The index's record of an entry `listed` (with its name key) and named as
/// `naming` says.
fn meta(listed: layout::Listed, naming: Naming) -> Meta {
    let name_key = listed.name_key.expect("a listed entry's name key is known");
    Meta::new(listed.file_bytes, listed.created_unix_ms, name_key, naming)
}

/// Reads and verifies entries named as before 2026-12-06, whose names do not carry
/// what the index needs (the name key, and before 2026-12 the size and time). A failed read or check is tried once more before the entry
/// is set aside; a permission error refuses the open instead (a deploy with the
/// wrong owner must not quarantine the backlog).
async fn read_legacy(
    disk: &Arc<dyn Disk>,
    entries_dir: &Path,
    names: Vec<String>,
) -> Result<Vec<(String, Result<layout::Listed, String>)>, OpenError> {
    let mut reads = futures::stream::iter(names.into_iter().map(|name| {
        let disk = disk.clone();
        let path = entries_dir.join(&name);
        async move {
            let mut verdict: io::Result<Result<layout::Listed, String>> = Ok(Err(String::new()));
            for _ in 0..2 {
                verdict = match disk.read(&path).await {
                    Ok(data) => Ok(layout::verify(&name, Bytes::from(data))
                        .map(|(h, _)| layout::Listed {
                            created_unix_ms: h.created_unix_ms,
                            file_bytes: h.file_bytes(),
                            name_key: Some(crate::name::key(&h.name)),
                        })
                        .map_err(|e| e.to_string())),
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(e),
                    Err(e) => Ok(Err(format!("read failed: {e}"))),
                };
                if matches!(verdict, Ok(Ok(_)) | Err(_)) {
                    break;
                }
            }
            (name, path, verdict)
        }
    }))
    .buffered(OPEN_READ_CONCURRENCY);
    let mut found = Vec::new();
    while let Some((name, path, verdict)) = reads.next().await {
        found.push((name, verdict.map_err(io_err("read", &path))?));
    }
    Ok(found)
}

async fn quarantine_all(
    disk: &dyn Disk,
    dirs: &Dirs,
    quarantine: &mut Vec<String>,
    to_quarantine: &[(OsString, String)],
    metrics: &Metrics,
) -> Result<(), OpenError> {
    if to_quarantine.is_empty() {
        return Ok(());
    }
    for (name, reason) in to_quarantine {
        let shown = name.to_string_lossy();
        let target = layout::unique_name(quarantine, &shown);
        let from = dirs.entries.join(name);
        move_with_note(
            disk,
            &from,
            &dirs.quarantine,
            &target,
            REASON_SUFFIX,
            reason,
        )
        .await
        .map_err(io_err("quarantine", &from))?;
        tracing::warn!(file = %shown, %reason, "quarantined spool entry");
        quarantine.push(target);
        metrics.quarantined.inc();
    }
    for dir in [&dirs.quarantine, &dirs.entries] {
        disk.sync_dir(dir)
            .await
            .map_err(io_err("sync directory", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What opening must index, by the plain way: sort by (number, name), keep the
    /// first of each number.
    fn sorted_and_deduplicated(
        listed: &[ListedName],
        names: &[String],
    ) -> (Vec<(u64, u64)>, Vec<String>) {
        let mut all = listed.to_vec();
        all.sort_by(|a, b| (a.0, &names[a.2]).cmp(&(b.0, &names[b.2])));
        let (mut kept, mut set_aside): (Vec<(u64, u64)>, _) = (Vec::new(), Vec::new());
        for (seq, listed, i) in all {
            match kept.last() {
                Some(&(last, _)) if last == seq => set_aside.push(names[i].clone()),
                _ => kept.push((seq, listed.file_bytes)),
            }
        }
        (kept, set_aside)
    }

    proptest! {
        /// Both ways to the index (a placement for dense numbers that do not
        /// repeat, a sort otherwise) keep one entry per number, the first by name,
        /// and set the others aside in order of (number, name).
        #[test]
        fn entries_are_indexed_in_order_keeping_the_first_name_of_each_number(
            picks in prop::collection::vec((0u64..64, 0u8..4), 0..200),
            spread in prop::sample::select(vec![1u64, 3, 1_000_000_007]),
            base in prop::sample::select(vec![0u64, 1, 1 << 40, u64::MAX - 63, u64::MAX - 63 * 3, u64::MAX - 64 * 1_000_000_007]),
            unique in any::<bool>(),
            order in any::<prop::sample::Index>(),
        ) {
            let mut picks = picks;
            if unique {
                picks.sort_by_key(|&(seq, _)| seq);
                picks.dedup_by_key(|&mut (seq, _)| seq);
                // In a listing's order: not sorted, either way.
                if !picks.is_empty() {
                    let turn = order.index(picks.len());
                    picks.rotate_left(turn);
                    picks[..turn.max(1)].reverse();
                }
            }
            let names: Vec<String> = (picks.iter().enumerate())
                .map(|(i, &(_, tag))| format!("{tag}-{}", picks.len() - i))
                .collect();
            let listed: Vec<ListedName> = (picks.iter().enumerate())
                .map(|(i, &(seq, _))| {
                    let listed = layout::Listed { created_unix_ms: seq, file_bytes: i as u64, name_key: Some(seq) };
                    (base.wrapping_add(seq * spread), listed, i)
                })
                .collect();
            let names_listed: Names = names.iter().collect();
            let mut to_quarantine = Vec::new();
            let index = index_listed(listed.clone(), &names_listed, &mut to_quarantine);
            let (kept, set_aside) = sorted_and_deduplicated(&listed, &names);
            let indexed: Vec<(u64, u64)> = index.iter().map(|(&seq, m)| (seq, m.file_bytes)).collect();
            prop_assert_eq!(&indexed, &kept);
            let quarantined: Vec<String> = to_quarantine.into_iter().map(|(name, _)| name).collect();
            prop_assert_eq!(quarantined, set_aside);
        }
    }

    /// The placement is taken for dense numbers that do not repeat, up to
    /// `u64::MAX`, and left for a sort when a number repeats or they are sparse.
    #[test]
    fn dense_unrepeated_numbers_are_placed_and_others_sorted() {
        let listed = |seqs: &[u64]| -> Vec<ListedName> {
            let listed = layout::Listed {
                created_unix_ms: 1,
                file_bytes: 2,
                name_key: Some(3),
            };
            seqs.iter()
                .enumerate()
                .map(|(i, &seq)| (seq, listed, i))
                .collect()
        };
        let placed = placed_by_seq(&listed(&[u64::MAX, u64::MAX - 2, u64::MAX - 1]));
        let seqs: Vec<u64> = placed.expect("dense").iter().map(|&(seq, _)| seq).collect();
        assert_eq!(seqs, [u64::MAX - 2, u64::MAX - 1, u64::MAX]);
        assert!(
            placed_by_seq(&listed(&[7, 5, 9])).is_some(),
            "5 slots for 3 entries"
        );
        assert!(placed_by_seq(&listed(&[7, 5, 8, 7])).is_none(), "7 repeats");
        assert!(
            placed_by_seq(&listed(&[1, 8])).is_none(),
            "8 slots for 2 entries"
        );
        assert!(placed_by_seq(&listed(&[])).is_none());
    }
}
