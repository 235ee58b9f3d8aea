//! The producers' ledger: every write issued and what its caller was told. It lives
//! outside the turmoil hosts, so it survives their crashes; the checker compares it to
//! the bucket.
//!
//! Memory is 20 bytes a write (a 32-hour replay at 50 writes/s issues 5.8M): names
//! and payloads are not stored but derived from `(host, seq)`, payloads as windows on
//! one shared block ([`payload`]).

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

/// Payloads of up to this many bytes are windows on one shared block of pseudo-random
/// bytes; larger ones are generated whole.
pub const MAX_SHARED_PAYLOAD_BYTES: usize = 4 << 20;

/// Where a shared payload may start: any offset in `0..=SHARED_OFFSETS`.
const SHARED_OFFSETS: usize = 4 << 20;

/// The payload of a write: `size` bytes derived from `(seed, host, seq)`, the same
/// every run, and a prefix of the same write's payload of any larger size (up to
/// [`MAX_SHARED_PAYLOAD_BYTES`]).
///
/// A payload is a window at a pseudo-random offset in one block of bytes shared by
/// every write, not a buffer of its own: the spool keeps a caller's buffer as it is
/// (`spool::disk::Contents`), so a replay's 1.87M spooled entries hold no payload
/// bytes of their own, and no write spends time generating one. Two writes of the
/// same size get the same bytes only when their offsets coincide (one chance in
/// four million), so a drainer that uploads one entry's bytes under another's name
/// is still caught by the checker's crc32c.
pub fn payload(seed: u64, host: u32, seq: u64, size: usize) -> bytes::Bytes {
    let start = seed ^ (u64::from(host) << 48) ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if size > MAX_SHARED_PAYLOAD_BYTES {
        return splitmix_bytes(start, size).into();
    }
    let offset = (splitmix(start.wrapping_add(0x9e37_79b9_7f4a_7c15)) % (SHARED_OFFSETS as u64 + 1))
        as usize;
    shared_payload_block().slice(offset..offset + size)
}

/// The block every shared payload is a window on, generated once per process.
fn shared_payload_block() -> &'static bytes::Bytes {
    static BLOCK: std::sync::OnceLock<bytes::Bytes> = std::sync::OnceLock::new();
    BLOCK.get_or_init(|| {
        splitmix_bytes(
            0x5350_4f4f_4c50_4159,
            SHARED_OFFSETS + MAX_SHARED_PAYLOAD_BYTES,
        )
        .into()
    })
}

/// `size` bytes of the SplitMix64 stream that starts after `state`.
fn splitmix_bytes(mut state: u64, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        out.extend_from_slice(&splitmix(state).to_le_bytes());
    }
    out.truncate(size);
    out
}

/// SplitMix64's output function.
fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn ms(t: Duration) -> u32 {
    u32::try_from(t.as_millis()).unwrap_or(u32::MAX)
}

impl Ledger {
    /// An empty ledger for `hosts` hosts, each with room for `expected_writes`
    /// ([`Workload::expected_writes_per_host`](crate::scenario::Workload::expected_writes_per_host)):
    /// grown by doubling, a ledger is copied and first touched at about twice its
    /// final size (megabytes); page faults in the producer's loop were about 1% of
    /// the bench's 90-minute slice (docs/benchmarks-log.md, 2026-12-06).
    pub fn new(hosts: u32, expected_writes: usize) -> Self {
        // Each built, not cloned: a clone of a `Vec` keeps its length, not its room.
        let hosts = (0..hosts)
            .map(|_| HostLedger {
                writes: Vec::with_capacity(expected_writes),
                in_flight: BTreeSet::new(),
            })
            .collect();
        Self { hosts }
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

    /// Write `seq` of `host`, to change: what a test of the checker plants.
    pub fn get_mut(&mut self, host: u32, seq: u64) -> Option<&mut Write> {
        self.hosts
            .get_mut(host as usize)?
            .writes
            .get_mut(seq as usize)
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
    fn shared_payloads_are_windows_on_one_block_and_large_ones_their_own() {
        let a = payload(1, 0, 5, 2048);
        let b = payload(1, 0, 6, 2048);
        let block = shared_payload_block().as_ptr_range();
        for p in [&a, &b] {
            assert!(
                block.contains(&p.as_ptr()),
                "a small payload has its own buffer"
            );
        }
        let large = payload(1, 0, 5, MAX_SHARED_PAYLOAD_BYTES + 1);
        assert_eq!(large.len(), MAX_SHARED_PAYLOAD_BYTES + 1);
        assert!(!block.contains(&large.as_ptr()));
        assert_eq!(large, payload(1, 0, 5, MAX_SHARED_PAYLOAD_BYTES + 1));
        assert_ne!(large, payload(1, 0, 6, MAX_SHARED_PAYLOAD_BYTES + 1));
    }

    #[test]
    fn shared_payloads_spread_over_the_block() {
        // Offsets of 10,000 writes: hardly any two alike, and both ends of the block used.
        let block = shared_payload_block().as_ptr() as usize;
        let offsets: BTreeSet<usize> = (0..10_000)
            .map(|seq| payload(7, 1, seq, 1).as_ptr() as usize - block)
            .collect();
        assert!(offsets.len() > 9_980, "{} distinct offsets", offsets.len());
        assert!(*offsets.first().unwrap() < SHARED_OFFSETS / 100);
        assert!(*offsets.last().unwrap() > SHARED_OFFSETS / 100 * 99);
    }

    /// Every host's ledger has its room, not only the one `vec!` would have moved.
    #[test]
    fn every_host_reserves_its_expected_writes() {
        let ledger = Ledger::new(3, 1000);
        for host in &ledger.hosts {
            assert!(host.writes.capacity() >= 1000, "{}", host.writes.capacity());
        }
    }

    #[test]
    fn a_crash_turns_in_flight_writes_into_unknown_and_late_answers_are_ignored() {
        let mut ledger = Ledger::new(1, 0);
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
