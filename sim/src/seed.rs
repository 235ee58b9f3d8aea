//! Every random choice of a run derives from the scenario's seed: one independent
//! seed per purpose, host and boot ([`derive_seed`] with a [`purpose`]), so that
//! adding a draw for one purpose never shifts another's.

/// Derives an independent seed for one purpose from the scenario seed.
pub fn derive_seed(seed: u64, parts: &[u64]) -> u64 {
    let mut z = seed;
    for &p in parts {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_add(p);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
    }
    z
}

/// Seed purposes, for [`derive_seed`].
pub mod purpose {
    /// turmoil's world RNG.
    pub const TURMOIL: u64 = 1;
    /// The fake's fault RNG.
    pub const FAKE: u64 = 2;
    /// A host boot's producer.
    pub const PRODUCER: u64 = 3;
    /// A host boot's drainer jitter.
    pub const DRAINER: u64 = 4;
    /// Payload bytes.
    pub const PAYLOAD: u64 = 5;
    /// A host's disk (faults and what survives power loss).
    pub const DISK: u64 = 6;
    /// A fault window's drawn start and length (`[[fault]] from`/`length` as
    /// distributions).
    pub const FAULT_SHAPE: u64 = 7;
    /// A host boot's reads and lists through the relay (`[relay] reads_per_write`,
    /// `lists_per_write`): their own stream, so turning them on changes no write.
    pub const RELAY_READS: u64 = 8;
}
