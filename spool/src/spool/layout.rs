//! The on-disk layout of a spool directory, in one place: directory names, file
//! suffixes, how a sequence number becomes a file name and back, and the check that
//! an entry file is what its name says. [`Spool::open`](crate::Spool::open) and the
//! operator's view ([`inspect`](crate::inspect), `spool verify`) both judge entries
//! with [`verify`], so they cannot disagree.
//!
//! ```text
//! DIR/LOCK                        exclusive lock (holder's pid inside)
//! DIR/entries/<seq>.<ms>.<bytes>.<key>.entry
//!                                 pending objects: 20-digit zero-padded sequence
//!                                 number, creation time (ms since the Unix epoch),
//!                                 file size and the key of the object name (16 hex
//!                                 digits, `name::key`), so that open indexes an
//!                                 entry, and the order of one name's entries, from
//!                                 the directory listing alone
//! DIR/entries/<seq>.<ms>.<bytes>.entry
//!                                 a pending object written before 2026-12-06
//!                                 (format 2): open reads its header for the key
//! DIR/entries/<seq>.entry         a pending object written before 2026-12 (format 1):
//!                                 open reads its header
//! DIR/entries/<seq>.tmp           a put in progress; deleted at open
//! DIR/quarantine/<file>           entries that failed verification, as found
//! DIR/quarantine/<file>.reason    why
//! DIR/dead-letter/<file>          entries the store refused for good, as named in
//! DIR/dead-letter/<file>.error    entries/, and the store's error
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

/// `00000000000000000042.1791457200123.1071.af63bd4c8601b7df.entry`: the name of
/// entry `seq`, created at `created_unix_ms`, `file_bytes` long, for an object name
/// whose key ([`name::key`]) is `name_key`.
pub fn entry_file_name(seq: u64, created_unix_ms: u64, file_bytes: u64, name_key: u64) -> String {
    let mut name = String::with_capacity(80);
    push_listed(&mut name, seq, created_unix_ms, file_bytes);
    name.push('.');
    push_hex(&mut name, name_key);
    name.push_str(ENTRY_SUFFIX);
    name
}

/// `00000000000000000042.1791457200123.1071.entry`: how an entry was named from
/// 2026-12 to 2026-12-06, without its object name's key.
pub fn unkeyed_entry_file_name(seq: u64, created_unix_ms: u64, file_bytes: u64) -> String {
    let mut name = String::with_capacity(64);
    push_listed(&mut name, seq, created_unix_ms, file_bytes);
    name.push_str(ENTRY_SUFFIX);
    name
}

/// `<seq>.<ms>.<bytes>`, the start of every listed name.
fn push_listed(name: &mut String, seq: u64, created_unix_ms: u64, file_bytes: u64) {
    push_decimal(name, seq, SEQ_DIGITS);
    for part in [created_unix_ms, file_bytes] {
        name.push('.');
        push_decimal(name, part, 1);
    }
}

/// Digits of a name key in a file name.
const KEY_DIGITS: usize = 16;

/// Appends `n` as 16 lower-case hex digits.
fn push_hex(out: &mut String, n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..KEY_DIGITS).rev() {
        out.push(char::from(DIGITS[((n >> (shift * 4)) & 15) as usize]));
    }
}

/// The value of exactly 16 lower-case hex digits.
fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.len() != KEY_DIGITS {
        return None;
    }
    // By table, without a branch per digit: open parses one key per entry, and the
    // matching fold was 7% of opening 100k entries.
    let (value, bad) = digits.iter().fold((0u64, 0u8), |(value, bad), &b| {
        let digit = HEX_VALUE[usize::from(b)];
        (value << 4 | u64::from(digit & 0xf), bad | digit)
    });
    (bad & NOT_HEX == 0).then_some(value)
}

/// Marks a byte that is not a lowercase hex digit in [`HEX_VALUE`].
const NOT_HEX: u8 = 0x10;

/// Each byte's value as a lowercase hex digit, or [`NOT_HEX`].
const HEX_VALUE: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut b = 0;
    while b < 10 {
        table[b'0' as usize + b] = b as u8;
        if b < 6 {
            table[b'a' as usize + b] = 10 + b as u8;
        }
        b += 1;
    }
    table
};

/// A sequence number's digits in a file name, zeros first (`u64::MAX` has 20):
/// names sort as their numbers do.
const SEQ_DIGITS: usize = 20;

/// Appends `n` in decimal, with zeros first up to `min_digits` (at most 20). By
/// hand: every put names two files, and naming them was about 1% of a replay's
/// CPU with `format!`.
fn push_decimal(out: &mut String, n: u64, min_digits: usize) {
    debug_assert!((1..=SEQ_DIGITS).contains(&min_digits));
    let mut digits = [b'0'; SEQ_DIGITS];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let from = at.min(digits.len() - min_digits);
    out.push_str(std::str::from_utf8(&digits[from..]).expect("ASCII digits"));
}

/// `00000000000000000042.entry`: how entry files were named before 2026-12.
pub fn legacy_entry_file_name(seq: u64) -> String {
    format!("{seq:020}{ENTRY_SUFFIX}")
}

/// What an entry file's name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryName {
    /// The sequence number.
    pub seq: u64,
    /// Creation time and file size, when the name carries them (not in names
    /// written before 2026-12).
    pub listed: Option<Listed>,
}

/// What the directory listing tells of an entry without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// Creation time, ms since the Unix epoch.
    pub created_unix_ms: u64,
    /// Size of the entry file.
    pub file_bytes: u64,
    /// The key of its object name ([`name::key`]), when the name carries it (not
    /// in names written before 2026-12-06).
    pub name_key: Option<u64>,
}

/// The number at the start of `s` (1 to 20 ASCII digits that fit in a `u64`) and what
/// follows it. Eight digits at a time while eight follow, then one at a time.
fn leading_number(s: &[u8]) -> Option<(u64, &[u8])> {
    let (mut value, mut len) = (0u64, 0);
    while let Some(eight) = s.get(len..len + 8).and_then(eight_digits) {
        if len + 8 > 20 {
            return None;
        }
        value = value.checked_mul(100_000_000)?.checked_add(eight)?;
        len += 8;
    }
    for &byte in &s[len..] {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        if len == 20 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
        len += 1;
    }
    (len > 0).then(|| (value, &s[len..]))
}

/// The value of eight ASCII digits, or `None` if any of the bytes is not one: the
/// digits checked and combined within one `u64` (the combining step after
/// simdjson's `parse_eight_digits_unrolled`), a third of the instructions of a loop
/// per digit. Open parses every name in the backlog's directory.
fn eight_digits(bytes: &[u8]) -> Option<u64> {
    let word = u64::from_le_bytes(bytes.try_into().ok()?);
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Every byte is 0x30..=0x3f, and adding 6 to it does not leave that range: 0..=9.
    // (Where every byte is at most 0x3f, adding 6 to each carries out of none.)
    let high_nibbles_are_3 = word & (0xf0 * ONES) == 0x30 * ONES;
    let low_nibbles_are_0_to_9 = word.wrapping_add(0x06 * ONES) & (0xf0 * ONES) == 0x30 * ONES;
    if !(high_nibbles_are_3 && low_nibbles_are_0_to_9) {
        return None;
    }
    // The first digit is the lowest byte: pairs, then fours, then the eight.
    let digits = word - 0x30 * ONES;
    let pairs = (digits.wrapping_mul(10 * 256 + 1) >> 8) & 0x00ff_00ff_00ff_00ff;
    let fours = (pairs.wrapping_mul(100 * 65_536 + 1) >> 16) & 0x0000_ffff_0000_ffff;
    Some(fours.wrapping_mul(10_000 * (1 << 32) + 1) >> 32)
}

/// Parses an entry file name, in either naming, in one pass over its bytes: open
/// parses every name in the directory, so this is most of what it adds to a listing.
pub fn parse_entry_name(file_name: &str) -> Option<EntryName> {
    let stem = file_name.strip_suffix(ENTRY_SUFFIX)?.as_bytes();
    let (seq, rest) = leading_number(stem)?;
    if stem.len() - rest.len() != 20 {
        return None;
    }
    if rest.is_empty() {
        return Some(EntryName { seq, listed: None });
    }
    let (created_unix_ms, rest) = leading_number(rest.strip_prefix(b".")?)?;
    let (file_bytes, rest) = leading_number(rest.strip_prefix(b".")?)?;
    let name_key = match rest {
        [] => None,
        [b'.', key @ ..] => Some(parse_hex(key)?),
        _ => return None,
    };
    Some(EntryName {
        seq,
        listed: Some(Listed {
            created_unix_ms,
            file_bytes,
            name_key,
        }),
    })
}

/// `00000000000000000042.tmp`
pub fn temp_file_name(seq: u64) -> String {
    let mut name = String::with_capacity(24);
    push_decimal(&mut name, seq, SEQ_DIGITS);
    name.push_str(TEMP_SUFFIX);
    name
}

/// The sequence number in an entry file name, if it is one.
pub fn parse_seq(file_name: &str) -> Option<u64> {
    parse_entry_name(file_name).map(|n| n.seq)
}

/// Why an entry file cannot be trusted as the entry its name says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The bytes fail a check of the format (length, checksum, magic, ...).
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    /// The header disagrees with the file name (sequence number, creation time or
    /// size), or the name is not an entry file name.
    #[error(
        "file name does not match its header (sequence {seq}, created {created_unix_ms}, {file_bytes} bytes)"
    )]
    NameMismatch {
        /// The sequence number in the header.
        seq: u64,
        /// The creation time in the header.
        created_unix_ms: u64,
        /// The file size the header implies.
        file_bytes: u64,
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
    let matches = parse_entry_name(file_name).is_some_and(|n| {
        n.seq == header.seq
            && n.listed.is_none_or(|l| {
                l.created_unix_ms == header.created_unix_ms
                    && l.file_bytes == header.file_bytes()
                    && l.name_key.is_none_or(|key| key == name::key(&header.name))
            })
    });
    if !matches {
        return Err(VerifyError::NameMismatch {
            seq: header.seq,
            created_unix_ms: header.created_unix_ms,
            file_bytes: header.file_bytes(),
        });
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

    /// The names built by hand are those `format!` gives, at the edges of every
    /// number of digits.
    #[test]
    fn names_are_formatted_as_format_gives_them() {
        let mut numbers = vec![0, u64::MAX];
        let mut power = 1u64;
        while let Some(next) = power.checked_mul(10) {
            numbers.extend([power - 1, power, power + 1]);
            power = next;
        }
        numbers.extend([power - 1, power, power + 1]);
        for &a in &numbers {
            assert_eq!(temp_file_name(a), format!("{a:020}{TEMP_SUFFIX}"));
            for &b in &numbers {
                assert_eq!(
                    unkeyed_entry_file_name(a, b, a ^ b),
                    format!("{a:020}.{b}.{}{ENTRY_SUFFIX}", a ^ b)
                );
                assert_eq!(
                    entry_file_name(a, b, a ^ b, a.wrapping_mul(b)),
                    format!(
                        "{a:020}.{b}.{}.{:016x}{ENTRY_SUFFIX}",
                        a ^ b,
                        a.wrapping_mul(b)
                    )
                );
            }
        }
    }

    #[test]
    fn entry_file_names_round_trip_and_reject_lookalikes() {
        let name = entry_file_name(42, 1_791_457_200_123, 1071, 0xaf63_bd4c_8601_b7df);
        assert_eq!(
            name,
            "00000000000000000042.1791457200123.1071.af63bd4c8601b7df.entry"
        );
        let listed = Listed {
            created_unix_ms: 1_791_457_200_123,
            file_bytes: 1071,
            name_key: Some(0xaf63_bd4c_8601_b7df),
        };
        assert_eq!(
            parse_entry_name(&name),
            Some(EntryName {
                seq: 42,
                listed: Some(listed)
            })
        );
        let unkeyed = unkeyed_entry_file_name(42, 1_791_457_200_123, 1071);
        assert_eq!(
            parse_entry_name(&unkeyed).and_then(|n| n.listed),
            Some(Listed {
                name_key: None,
                ..listed
            })
        );
        assert_eq!(parse_seq(&legacy_entry_file_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(
            parse_entry_name(&legacy_entry_file_name(7)),
            Some(EntryName {
                seq: 7,
                listed: None
            })
        );
        for bad in [
            "42.entry",
            "0000000000000000004x.entry",
            "00000000000000000042.tmp",
            "00000000000000000042.1.entry",
            "00000000000000000042.1.2.3.entry",
            "00000000000000000042.1.2.af63bd4c8601b7d.entry",
            "00000000000000000042.1.2.af63bd4c8601b7dff.entry",
            "00000000000000000042.1.2.AF63BD4C8601B7DF.entry",
            "00000000000000000042.1.2.af63bd4c8601b7dg.entry",
            "00000000000000000042.1.2.af63bd4c8601b7df.1.entry",
            "00000000000000000042..2.entry",
            "00000000000000000042.1.x.entry",
            "00000000000000000042.1.2..entry",
            "00000000000000000042.1.2.entry.entry",
            "00000000000000000042.+1.2.entry",
            "00000000000000000042.1.2",
            "00000000000000000042..entry",
            "000000000000000000042.entry",
            ".entry",
            "18446744073709551616.entry",
            "00000000000000000042.123456789012345678901.2.entry",
            "00000000000000000042.1.18446744073709551616.entry",
            "00000000000000000042.000000000000000000000042.1.entry",
            "00000000000000000042.1.000000000000000000000042.entry",
        ] {
            assert_eq!(parse_entry_name(bad), None, "{bad}");
        }
        assert_eq!(unique_name(&["a".into(), "a.1".into()], "a"), "a.2");
    }

    /// The parser as first written, with `split`: the one-pass parser must agree
    /// with it on every name.
    fn parse_by_split(file_name: &str) -> Option<EntryName> {
        let digits = |s: &str| -> Option<u64> {
            (!s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        let mut parts = file_name.strip_suffix(ENTRY_SUFFIX)?.split('.');
        let seq_digits = parts.next()?;
        if seq_digits.len() != 20 {
            return None;
        }
        let seq = digits(seq_digits)?;
        let hex = |s: &str| -> Option<u64> {
            (s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                .then(|| u64::from_str_radix(s, 16).ok())
                .flatten()
        };
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (None, ..) => Some(EntryName { seq, listed: None }),
            (Some(created), Some(bytes), key, None) => Some(EntryName {
                seq,
                listed: Some(Listed {
                    created_unix_ms: digits(created)?,
                    file_bytes: digits(bytes)?,
                    name_key: match key {
                        None => None,
                        Some(key) => Some(hex(key)?),
                    },
                }),
            }),
            _ => None,
        }
    }

    /// `leading_number` as first written, one digit at a time.
    fn leading_number_one_by_one(s: &[u8]) -> Option<(u64, &[u8])> {
        let len = s.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 || len > 20 {
            return None;
        }
        let value = std::str::from_utf8(&s[..len]).ok()?.parse().ok()?;
        Some((value, &s[len..]))
    }

    proptest::proptest! {
        #[test]
        fn eight_digits_at_once_are_the_digits_one_by_one(
            digits in proptest::array::uniform8(b'0'..=b'9'),
            other in proptest::option::of((0usize..8, proptest::prop_oneof![
                proptest::num::u8::ANY, b'/'..=b':', 0xb0u8..=0xbf, 0xfau8..=0xff,
            ])),
        ) {
            let mut bytes = digits;
            if let Some((at, byte)) = other {
                bytes[at] = byte;
            }
            let one_by_one = bytes.iter().try_fold(0u64, |value, &b| {
                b.is_ascii_digit().then(|| value * 10 + u64::from(b - b'0'))
            });
            proptest::prop_assert_eq!(eight_digits(&bytes), one_by_one, "{:?}", bytes);
        }

        #[test]
        fn numbers_read_eight_digits_at_a_time_are_those_read_one_at_a_time(
            text in "(0{0,20}|1844674407370955161|[1-9])[0-9]{0,12}[.x/:]?[0-9]{0,3}",
        ) {
            proptest::prop_assert_eq!(
                leading_number(text.as_bytes()),
                leading_number_one_by_one(text.as_bytes()),
                "{}", text
            );
        }

        #[test]
        fn the_one_pass_parser_agrees_with_split(
            name in "(0{18}[0-9]{1,3}|1844674407370955161[0-9]|[0-9]{19})(\\.(0{0,12}|1844674407370955161)[0-9+x]{0,13}){0,2}(\\.[0-9a-gA]{15,17})?(\\.(0{0,12}|1844674407370955161)[0-9+x]{0,13})?(\\.entry|\\.tmp|)",
        ) {
            proptest::prop_assert_eq!(parse_entry_name(&name), parse_by_split(&name), "{}", name);
        }
    }

    #[test]
    fn an_intact_entry_under_another_name_or_with_a_bad_object_name_fails() {
        let mode = crate::WriteMode::CreateIfAbsent;
        let data = entry::encode(7, 5, "ok", mode, &[], b"x");
        let size = data.len() as u64;
        let key = name::key("ok");
        assert!(verify(&entry_file_name(7, 5, size, key), data.clone()).is_ok());
        assert!(verify(&unkeyed_entry_file_name(7, 5, size), data.clone()).is_ok());
        assert!(verify(&legacy_entry_file_name(7), data.clone()).is_ok());
        for wrong in [
            entry_file_name(8, 5, size, key),
            entry_file_name(7, 6, size, key),
            entry_file_name(7, 5, size + 1, key),
            entry_file_name(7, 5, size, key ^ 1),
            legacy_entry_file_name(8),
        ] {
            assert!(
                matches!(
                    verify(&wrong, data.clone()),
                    Err(VerifyError::NameMismatch { seq: 7, .. })
                ),
                "{wrong}"
            );
        }
        let bad_name = entry::encode(7, 5, "a\nb", mode, &[], b"x");
        let file = entry_file_name(7, 5, bad_name.len() as u64, name::key("a\nb"));
        assert!(matches!(
            verify(&file, bad_name.clone()),
            Err(VerifyError::Name(_))
        ));
        assert!(matches!(
            verify_header(&file, &bad_name),
            Err(VerifyError::Name(_))
        ));
    }
}
