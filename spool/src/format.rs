//! Counts, byte sizes, durations and instants written for people: the one place the
//! `spool` command, the bench's reports and its charts format them, so that they
//! agree. Wire formats (HTTP dates, Cloud Storage's timestamps) are not here: they
//! belong to the protocol that defines them.

use std::time::{Duration, UNIX_EPOCH};

/// A count with thousands separators: `5,743,426`.
///
/// ```
/// assert_eq!(spool::format::count(5_743_426), "5,743,426");
/// assert_eq!(spool::format::count(999), "999");
/// ```
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte count in binary units: `512 B`, `1.4 GiB`.
///
/// ```
/// assert_eq!(spool::format::bytes(512), "512 B");
/// assert_eq!(spool::format::bytes(3 << 29), "1.5 GiB");
/// ```
pub fn bytes(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

/// A duration to the second (`1h 2m 3s`), or in milliseconds below a second.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(spool::format::duration(Duration::from_millis(3_723_400)), "1h 2m 3s");
/// assert_eq!(spool::format::duration(Duration::from_millis(250)), "250 ms");
/// ```
pub fn duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// An instant as RFC 3339 in UTC to the second: `2026-10-08T11:00:00Z`.
///
/// ```
/// assert_eq!(spool::format::rfc3339_seconds(1_791_457_200_999), "2026-10-08T11:00:00Z");
/// ```
pub fn rfc3339_seconds(unix_ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(unix_ms)).to_string()
}

/// An instant as RFC 3339 in UTC to the millisecond: `2026-10-08T11:00:00.123Z`.
///
/// ```
/// assert_eq!(spool::format::rfc3339_millis(1_791_457_200_123), "2026-10-08T11:00:00.123Z");
/// ```
pub fn rfc3339_millis(unix_ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(unix_ms)).to_string()
}
