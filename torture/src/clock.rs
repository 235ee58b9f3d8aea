//! Wall-clock time, for logs only: the writers' lines and the chaos's events carry
//! it so that they can be read beside the relay's and the fake's logs. Nothing the
//! run decides depends on it (the schedule comes from the seed).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, as the writer scripts log them (`t`).
pub fn unix_ms() -> u64 {
    now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Now in RFC 3339 with milliseconds, as the relay's log prints times.
pub fn rfc3339() -> String {
    humantime::format_rfc3339_millis(now()).to_string()
}

// The one real read of the wall clock: a torture run is real processes in real
// time, and its logs are matched with theirs by the clock they print.
#[allow(clippy::disallowed_methods)]
fn now() -> SystemTime {
    SystemTime::now()
}
