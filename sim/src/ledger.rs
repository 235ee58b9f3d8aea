//! The producers' ledger: every write issued and what its caller was told. It lives
//! outside the turmoil hosts, so it survives their crashes; the checker compares it to
//! the bucket.
//!
//! Memory is 20 bytes a write (a 32-hour replay at 50 writes/s issues 5.8M): names
//! and payloads are not stored but derived from `(host, seq)`.

use std::collections::BTreeSet;
use std::time::Duration;

/// What the caller of one write was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Told {
    /// `upload` has not returned.
    InFlight,
    /// `Ok(Stored)`.
    Stored,
    /// `Ok(Spooled)`.
    Spooled,
    /// `Err(SpoolFull)` or too large for the spool: backpressure.
    Rejected,
    /// Any other error (refused by the store, invalid, spool broken).
    Failed,
    /// The process died (crash or restart) before `upload` returned.
    Unknown,
}

impl Told {
    /// Lower-case name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Told::InFlight => "in_flight",
            Told::Stored => "stored",
            Told::Spooled => "spooled",
            Told::Rejected => "rejected",
            Told::Failed => "failed",
            Told::Unknown => "unknown",
        }
    }

    /// True when the app took responsibility for the bytes.
    pub fn acknowledged(self) -> bool {
        matches!(self, Told::Stored | Told::Spooled)
    }
}

/// How many writes were issued and what their callers were told: over a whole run
/// (the checker's tally, `report.json`) or one sample interval (the time series).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Answers {
    /// Writes issued.
    pub writes: u64,
    /// Callers told `Stored` (written directly).
    pub stored: u64,
    /// Callers told `Spooled`.
    pub spooled: u64,
    /// Callers told the spool was full (backpressure).
    pub rejected: u64,
    /// Callers told of another error (store refused for good, ...).
    pub failed: u64,
    /// Writes in flight when their process died.
    pub unknown: u64,
}

impl Answers {
    /// Counts one caller told `told`; a write still in flight counts nowhere.
    pub fn tell(&mut self, told: Told) {
        match told {
            Told::Stored => self.stored += 1,
            Told::Spooled => self.spooled += 1,
            Told::Rejected => self.rejected += 1,
            Told::Failed => self.failed += 1,
            Told::Unknown => self.unknown += 1,
            Told::InFlight => {}
        }
    }
}

/// One issued write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write {
    /// Milliseconds from t = 0 when it was issued.
    pub issued_ms: u32,
    /// Milliseconds from t = 0 when the caller was told (0 while in flight).
    pub told_ms: u32,
    /// Payload size.
    pub size: u32,
    /// crc32c of the payload.
    pub crc32c: u32,
    /// Which boot of the host issued it.
    pub boot: u16,
    /// Whether it is a poison object (the store refuses it for good).
    pub poison: bool,
    /// What the caller was told.
    pub told: Told,
}

/// All writes of one host, indexed by sequence number.
#[derive(Debug, Clone, Default)]
pub struct HostLedger {
    /// Writes by sequence number.
    pub writes: Vec<Write>,
    in_flight: BTreeSet<u64>,
}

/// The ledger of every host.
#[derive(Debug, Clone)]
pub struct Ledger {
    hosts: Vec<HostLedger>,
}

/// The payload of a write: `size` bytes derived from `(seed, host, seq)` by a
/// SplitMix64 stream (fast, and the same every run).
pub fn payload(seed: u64, host: u32, seq: u64, size: usize) -> bytes::Bytes {
    let mut state = seed ^ (u64::from(host) << 48) ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(size);
    out.into()
}

fn ms(t: Duration) -> u32 {
    u32::try_from(t.as_millis()).unwrap_or(u32::MAX)
}

impl Ledger {
    /// An empty ledger for `hosts` hosts.
    pub fn new(hosts: u32) -> Self {
        Self {
            hosts: vec![HostLedger::default(); hosts as usize],
        }
    }

    /// The sequence number the next write of `host` will get.
    pub fn next_seq(&self, host: u32) -> u64 {
        self.hosts[host as usize].writes.len() as u64
    }

    /// Records a new write; returns its sequence number.
    pub fn issue(
        &mut self,
        host: u32,
        boot: u16,
        at: Duration,
        size: u32,
        crc32c: u32,
        poison: bool,
    ) -> u64 {
        let h = &mut self.hosts[host as usize];
        let seq = h.writes.len() as u64;
        h.writes.push(Write {
            issued_ms: ms(at),
            told_ms: 0,
            size,
            crc32c,
            boot,
            poison,
            told: Told::InFlight,
        });
        h.in_flight.insert(seq);
        seq
    }

    /// Records what the caller of `(host, seq)` was told. A write already marked
    /// unknown (its boot ended) keeps that.
    pub fn tell(&mut self, host: u32, seq: u64, at: Duration, told: Told) {
        let h = &mut self.hosts[host as usize];
        if h.in_flight.remove(&seq) {
            let w = &mut h.writes[seq as usize];
            w.told = told;
            w.told_ms = ms(at);
        }
    }

    /// The process of `host` died: its writes in flight become unknown. Returns how
    /// many.
    pub fn end_boot(&mut self, host: u32, at: Duration) -> u64 {
        let h = &mut self.hosts[host as usize];
        let seqs = std::mem::take(&mut h.in_flight);
        for &seq in &seqs {
            let w = &mut h.writes[seq as usize];
            w.told = Told::Unknown;
            w.told_ms = ms(at);
        }
        seqs.len() as u64
    }

    /// Every process every host's writes wait on died (the relay's): every write in
    /// flight becomes unknown. Returns how many.
    pub fn end_all(&mut self, at: Duration) -> u64 {
        (0..self.hosts.len() as u32)
            .map(|host| self.end_boot(host, at))
            .sum()
    }

    /// Writes still in flight on `host`.
    pub fn in_flight(&self, host: u32) -> usize {
        self.hosts[host as usize].in_flight.len()
    }

    /// Each host's writes.
    pub fn hosts(&self) -> &[HostLedger] {
        &self.hosts
    }

    /// The write `(host, seq)`, if issued.
    pub fn get(&self, host: u32, seq: u64) -> Option<&Write> {
        self.hosts.get(host as usize)?.writes.get(seq as usize)
    }

    /// Total writes issued.
    pub fn len(&self) -> u64 {
        self.hosts.iter().map(|h| h.writes.len() as u64).sum()
    }

    /// True when nothing was issued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_reproducible_and_differ_by_write() {
        assert_eq!(payload(1, 0, 5, 100), payload(1, 0, 5, 100));
        assert_ne!(payload(1, 0, 5, 100), payload(1, 0, 6, 100));
        assert_ne!(payload(1, 0, 5, 100), payload(1, 1, 5, 100));
        assert_ne!(payload(1, 0, 5, 100), payload(2, 0, 5, 100));
        assert_eq!(payload(1, 0, 5, 13).len(), 13);
        assert_eq!(&payload(1, 0, 5, 100)[..13], &payload(1, 0, 5, 13)[..]);
    }

    #[test]
    fn a_crash_turns_in_flight_writes_into_unknown_and_late_answers_are_ignored() {
        let mut ledger = Ledger::new(1);
        let t = Duration::from_secs(1);
        let a = ledger.issue(0, 0, t, 10, 1, false);
        let b = ledger.issue(0, 0, t, 10, 2, false);
        ledger.tell(0, a, t, Told::Stored);
        assert_eq!(ledger.in_flight(0), 1);
        assert_eq!(ledger.end_boot(0, t), 1);
        ledger.tell(0, b, t, Told::Spooled);
        assert_eq!(ledger.get(0, b).unwrap().told, Told::Unknown);
        assert_eq!(ledger.get(0, a).unwrap().told, Told::Stored);
        assert_eq!(ledger.len(), 2);
    }
}
