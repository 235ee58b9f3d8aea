//! The on-disk layout of a spool directory, in one place: directory names, file
//! suffixes, how a sequence number becomes a file name and back, and the check that
//! an entry file is what its name says. [`Spool::open`](crate::Spool::open) and the
//! operator's view ([`inspect`](crate::inspect), `spool verify`) both judge entries
//! with [`verify`], so they cannot disagree.
//!
//! ```text
//! DIR/LOCK                      exclusive lock (holder's pid inside)
//! DIR/entries/<seq>.entry       pending objects, 20-digit zero-padded sequence numbers
//! DIR/entries/<seq>.tmp         a put in progress; deleted at open
//! DIR/quarantine/<file>         entries that failed verification, as found
//! DIR/quarantine/<file>.reason  why
//! DIR/dead-letter/<seq>.entry   entries the store refused for good
//! DIR/dead-letter/<seq>.error   the store's error
//! ```

use bytes::Bytes;

use crate::entry::{self, Corrupt, Header};
use crate::name::{self, InvalidName};

/// Subdirectory holding pending entries.
pub const ENTRIES_DIR: &str = "entries";
/// Subdirectory holding entries that failed verification.
pub const QUARANTINE_DIR: &str = "quarantine";
/// Subdirectory holding entries the store refused for good.
pub const DEAD_LETTER_DIR: &str = "dead-letter";
/// The lock file.
pub const LOCK_FILE: &str = "LOCK";
/// Suffix of a complete entry file.
pub const ENTRY_SUFFIX: &str = ".entry";
/// Suffix of a put in progress.
pub const TEMP_SUFFIX: &str = ".tmp";
/// Suffix of the note beside a quarantined file.
pub const REASON_SUFFIX: &str = ".reason";
/// Suffix of the note beside a dead-lettered entry.
pub const ERROR_SUFFIX: &str = ".error";

/// `00000000000000000042.entry`
pub fn entry_file_name(seq: u64) -> String {
    format!("{seq:020}{ENTRY_SUFFIX}")
}

/// `00000000000000000042.tmp`
pub fn temp_file_name(seq: u64) -> String {
    format!("{seq:020}{TEMP_SUFFIX}")
}

/// The sequence number in an entry file name, if it is one.
pub fn parse_seq(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_suffix(ENTRY_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Why an entry file cannot be trusted as the entry its name says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The bytes fail a check of the format (length, checksum, magic, ...).
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    /// The header's sequence number is not the one in the file name.
    #[error("file name does not match the sequence number {seq} in its header")]
    SeqMismatch {
        /// The sequence number in the header.
        seq: u64,
    },
    /// The header is intact but the object name in it is one no store accepts.
    #[error("stored object name is invalid: {0}")]
    Name(InvalidName),
}

/// Checks a whole entry file named `file_name`: format, both checksums, that the
/// header's sequence number is the file name's, and that the object name is valid.
/// Returns the header and the payload.
pub fn verify(file_name: &str, data: Bytes) -> Result<(Header, Bytes), VerifyError> {
    let (header, payload) = entry::decode(data)?;
    check_header(file_name, &header)?;
    Ok((header, payload))
}

/// The checks of [`verify`] that need only the header: for a listing that must not
/// read whole payloads.
pub fn verify_header(file_name: &str, head: &[u8]) -> Result<Header, VerifyError> {
    let (header, _) = entry::decode_header(head)?;
    check_header(file_name, &header)?;
    Ok(header)
}

fn check_header(file_name: &str, header: &Header) -> Result<(), VerifyError> {
    if parse_seq(file_name) != Some(header.seq) {
        return Err(VerifyError::SeqMismatch { seq: header.seq });
    }
    name::check(&header.name).map_err(VerifyError::Name)
}

/// `name`, or `name.1`, `name.2`, ... whichever is not taken yet.
pub(crate) fn unique_name(existing: &[String], name: &str) -> String {
    let taken = |candidate: &str| existing.iter().any(|e| e == candidate);
    if !taken(name) {
        return name.to_string();
    }
    (1..)
        .map(|n| format!("{name}.{n}"))
        .find(|c| !taken(c))
        .expect("an unused name exists")
}

/// Files in a set-aside directory that are not notes.
pub(crate) fn count_data_files(names: &[String], note_suffix: &str) -> u64 {
    names.iter().filter(|n| !n.ends_with(note_suffix)).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_file_names_round_trip_and_reject_lookalikes() {
        assert_eq!(parse_seq(&entry_file_name(42)), Some(42));
        assert_eq!(parse_seq(&entry_file_name(u64::MAX)), Some(u64::MAX));
        for bad in [
            "42.entry",
            "0000000000000000004x.entry",
            "00000000000000000042.tmp",
        ] {
            assert_eq!(parse_seq(bad), None, "{bad}");
        }
        assert_eq!(unique_name(&["a".into(), "a.1".into()], "a"), "a.2");
    }

    #[test]
    fn an_intact_entry_under_another_number_or_with_a_bad_name_fails() {
        let data = entry::encode(7, 0, "ok", b"x");
        assert!(verify(&entry_file_name(7), data.clone()).is_ok());
        assert_eq!(
            verify(&entry_file_name(8), data).unwrap_err(),
            VerifyError::SeqMismatch { seq: 7 }
        );
        let bad_name = entry::encode(7, 0, "a\nb", b"x");
        assert!(matches!(
            verify(&entry_file_name(7), bad_name.clone()),
            Err(VerifyError::Name(_))
        ));
        assert!(matches!(
            verify_header(&entry_file_name(7), &bad_name),
            Err(VerifyError::Name(_))
        ));
    }
}
