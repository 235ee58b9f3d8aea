//! Deliberate bugs at the disk seam, each a mistake a `Disk` implementation (like
//! `spool::StdDisk`) could plausibly make. The mutant catalogue (`sim::mutants`)
//! plants them to show that the bench catches each one.

/// A lie the simulated disk tells the spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiskMutant {
    /// `create_synced` writes but never calls `fdatasync`.
    DataNotSynced,
    /// `create_synced` ignores a short write: only half the data lands, and the call
    /// says it all did.
    ShortWriteIgnored,
    /// `rename` returns before the rename is done (a forgotten await): the directory
    /// sync that follows does not cover it.
    RenameNotAwaited,
    /// `sync_dir` returns at once without syncing.
    DirSyncSkipped,
    /// `sync_dir` swallows the fsync's error and reports success.
    DirSyncErrorHidden,
    /// `list` drops the entries whose creation time ends in 7 (a filter meant for
    /// temp files that also matches some entries): they are never indexed.
    ListingDropsEntries,
}
