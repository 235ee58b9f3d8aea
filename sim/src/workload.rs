//! What the producers write, derived from the scenario's seed and each write's
//! `(host, seq)`, so that nothing but the ledger's 20 bytes a write is stored and the
//! checker can recompute every expectation: the object's exact name, its attributes,
//! and whether another writer took the name first (and with which bytes).
//!
//! Names come in two styles. `plain`: `h<host>/<seq>`. `hard`: the same prefix, then
//! segments drawn from every character Cloud Storage allows that the client can
//! express (printable ASCII with `% # ? * [ ] { } ^ | < > " ~` and backtick among
//! them, spaces, non-ASCII letters, symbols and a 4-byte character), up to 1,024
//! bytes in all. Poison writes start with `poison/`, which the fake refuses.

use bytes::Bytes;
use fake_gcs::ObjectAttributes;
use object_store::{Attribute, Attributes};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::Scenario;
use crate::seed::derive_seed;

/// Names of poison writes start with this; the fake refuses them with 403.
pub const POISON_PREFIX: &str = "poison/";

/// Seed purposes within the workload.
mod purpose {
    pub const NAME: u64 = 101;
    pub const ATTRIBUTES: u64 = 102;
    pub const CONFLICT: u64 = 103;
    pub const OTHER_WRITERS_BYTES: u64 = 104;
    pub const OVERWRITE: u64 = 105;
}

/// An overwrite takes the name of one of its host's last this many writes.
pub const OVERWRITE_RECENT: u64 = 8;

/// Characters hard names are drawn from (besides `/` between segments).
const HARD_CHARS: &[&str] = &[
    "a", "Z", "0", "9", " ", "%", "%2F", "%25", "#", "?", "*", "[", "]", "{", "}", "^", "|", "<",
    ">", "\"", "~", "`", "\\", "+", "&", "=", ";", ":", "@", "$", ",", "'", "!", "(", ")", "-",
    "_", ".", "é", "ü", "ß", "Ω", "☃", "中", "文", "𝄞", "\u{a0}",
];

/// How the producers name and describe their objects.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Names from the hard alphabet, not `h<host>/<seq>` alone.
    pub hard_names: bool,
    /// Writes carry attributes (content type, encoding, cache control,
    /// disposition, language, custom metadata).
    pub attributes: bool,
    /// Share of writes whose name another writer takes first.
    pub conflicts: f64,
    /// Share of writes that take the name of one of their host's recent writes.
    pub overwrites: f64,
    /// The scenario's seed.
    pub seed: u64,
}

/// What the other writer put under a write's name before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// The very bytes the producer is about to write (an earlier try that landed).
    SameBytes,
    /// Other bytes of the same size: only the MD5, or the bytes read back, tell.
    SameSize,
    /// Other bytes of another size.
    OtherSize,
}

impl Shape {
    /// How `scenario`'s producers name and describe their writes.
    pub fn of(scenario: &Scenario) -> Self {
        Self {
            hard_names: scenario.workload.hard_names,
            attributes: scenario.workload.attributes,
            conflicts: scenario.workload.conflicts,
            overwrites: scenario.workload.overwrites,
            seed: scenario.seed,
        }
    }

    fn rng(&self, purpose: u64, host: u32, seq: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(derive_seed(self.seed, &[purpose, host.into(), seq]))
    }

    /// The earlier write whose name write `(host, seq)` takes again, if it is an
    /// overwrite: one of the host's last [`OVERWRITE_RECENT`] writes.
    pub fn overwritten(&self, host: u32, seq: u64) -> Option<u64> {
        if self.overwrites <= 0.0 || seq == 0 {
            return None;
        }
        let mut rng = self.rng(purpose::OVERWRITE, host, seq);
        if !rng.random_bool(self.overwrites) {
            return None;
        }
        Some(seq - rng.random_range(1..=seq.min(OVERWRITE_RECENT)))
    }

    /// The first write of the name write `(host, seq)` writes: its own `seq`
    /// unless it is an overwrite. Names are `h<host>/<first seq>...`.
    pub fn first_of_name(&self, host: u32, seq: u64) -> u64 {
        let mut first = seq;
        while let Some(earlier) = self.overwritten(host, first) {
            first = earlier;
        }
        first
    }

    /// How the producers write: without a precondition when the scenario has
    /// overwrites (the first write of a name too: a create-if-absent one racing a
    /// later overwrite would be a conflict), create-if-absent otherwise.
    pub fn write_mode(&self) -> spool::WriteMode {
        if self.overwrites > 0.0 {
            spool::WriteMode::Overwrite
        } else {
            spool::WriteMode::CreateIfAbsent
        }
    }

    /// The object name of write `(host, seq)`: that of the first write of its name.
    pub fn name(&self, host: u32, seq: u64, poison: bool) -> String {
        let seq = self.first_of_name(host, seq);
        let prefix = if poison { POISON_PREFIX } else { "" };
        let mut name = format!("{prefix}h{host}/{seq:010}");
        if self.hard_names {
            let mut rng = self.rng(purpose::NAME, host, seq);
            // Mostly short, sometimes up to the 1,024-byte limit.
            let budget = if rng.random_bool(0.1) {
                rng.random_range(200..=1024 - name.len() - 1)
            } else {
                rng.random_range(1..40)
            };
            name.push('/');
            name.push_str(&hard_segment_path(&mut rng, budget));
        }
        debug_assert!(name.len() <= spool::name::MAX_NAME_BYTES);
        name
    }

    /// The attributes of write `(host, seq)` (none unless the shape has them).
    pub fn attributes(&self, host: u32, seq: u64) -> Attributes {
        let mut attributes = Attributes::new();
        if !self.attributes {
            return attributes;
        }
        let mut rng = self.rng(purpose::ATTRIBUTES, host, seq);
        const TYPES: [&str; 4] = [
            "application/json",
            "text/plain; charset=utf-8",
            "image/png",
            "application/x-ndjson",
        ];
        attributes.insert(
            Attribute::ContentType,
            TYPES[rng.random_range(0..TYPES.len())].into(),
        );
        if rng.random_bool(0.5) {
            attributes.insert(Attribute::CacheControl, "private, max-age=60".into());
        }
        if rng.random_bool(0.3) {
            attributes.insert(
                Attribute::ContentDisposition,
                format!("attachment; filename=\"{seq}.bin\"").into(),
            );
        }
        if rng.random_bool(0.2) {
            attributes.insert(Attribute::ContentLanguage, "de".into());
        }
        if rng.random_bool(0.2) {
            attributes.insert(Attribute::ContentEncoding, "identity".into());
        }
        attributes.insert(
            Attribute::Metadata("writer".into()),
            format!("h{host}").into(),
        );
        attributes.insert(Attribute::Metadata("seq".into()), seq.to_string().into());
        attributes
    }

    /// Whether, and how, another writer takes the name of write `(host, seq)` first.
    pub fn conflict(&self, host: u32, seq: u64) -> Option<Conflict> {
        if self.conflicts <= 0.0 {
            return None;
        }
        let mut rng = self.rng(purpose::CONFLICT, host, seq);
        if !rng.random_bool(self.conflicts) {
            return None;
        }
        Some(match rng.random_range(0..3) {
            0 => Conflict::SameBytes,
            1 => Conflict::SameSize,
            _ => Conflict::OtherSize,
        })
    }

    /// Whether the conflicting object is a composite one (its ETag is not an MD5).
    pub fn conflict_is_composite(&self, host: u32, seq: u64) -> bool {
        let mut rng = self.rng(purpose::CONFLICT, host, seq);
        let _ = rng.random::<u64>();
        let _ = rng.random::<u64>();
        rng.random_bool(0.5)
    }
}

/// The object another writer put under a write's name before it: what the
/// producer plants in the bucket, and what the checker expects to find there when
/// the producer's write was (rightly) refused.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherWriter {
    /// The other writer's bytes.
    pub bytes: Bytes,
    /// Its content type (`None`: the store's default).
    pub content_type: Option<String>,
    /// Its other attributes.
    pub attributes: ObjectAttributes,
    /// Whether the object is composite (its ETag is not an MD5).
    pub composite: bool,
}

impl Shape {
    /// The object another writer put under the name of write `(host, seq)` before
    /// it, given the write's own bytes; `None` when no one did (never for a poison
    /// write, whose name the store refuses to everyone).
    pub fn other_writer(
        &self,
        host: u32,
        seq: u64,
        poison: bool,
        own: &Bytes,
    ) -> Option<OtherWriter> {
        if poison {
            return None;
        }
        let conflict = self.conflict(host, seq)?;
        let composite = self.conflict_is_composite(host, seq);
        let other_bytes = |size: usize| {
            let seed = derive_seed(self.seed, &[purpose::OTHER_WRITERS_BYTES]);
            crate::ledger::payload(seed, host, seq, size)
        };
        Some(match conflict {
            Conflict::SameBytes => {
                let (content_type, attributes) = object_attributes(&self.attributes(host, seq));
                OtherWriter {
                    bytes: own.clone(),
                    content_type,
                    attributes,
                    composite,
                }
            }
            Conflict::SameSize | Conflict::OtherSize => {
                let size = match conflict {
                    Conflict::SameSize => own.len(),
                    _ => own.len() + 1 + own.len() / 2,
                };
                let mut bytes = other_bytes(size).to_vec();
                if bytes == own.as_ref() {
                    // Tiny payloads can coincide; the other writer's must differ. An
                    // empty payload (`size = "0B"`) has no other bytes of its size:
                    // the other writer's is one byte.
                    match bytes.first_mut() {
                        Some(first) => *first ^= 0xff,
                        None => bytes.push(0xff),
                    }
                }
                OtherWriter {
                    bytes: bytes.into(),
                    content_type: Some("application/x-other-writer".into()),
                    attributes: ObjectAttributes::default(),
                    composite,
                }
            }
        })
    }
}

/// An object's content type and attributes as the fake (and the relay) keep them,
/// from the attributes `object_store` writes: the relay's own conversion.
pub use relay::object_attributes;

/// Segments of hard characters joined by `/`, at most `budget` bytes (at least 1),
/// none empty and none `.` or `..`: the caller's budget is what keeps the whole name
/// within Cloud Storage's 1,024 bytes.
///
/// A character is added only if it fits, and only if the segment it makes is valid
/// or still has a byte left to become so; a segment is closed with `/` only if a
/// byte is left for the next one. So the path never has to go past its budget to
/// end well (issue 42: it did, by a few bytes, when a segment was still empty,
/// `.` or `..` at the budget). Paths within budget are drawn as before: a path
/// differs only where the old one went past.
fn hard_segment_path(rng: &mut ChaCha8Rng, budget: usize) -> String {
    debug_assert!(budget >= 1, "an empty path cannot end a name");
    let valid = |segment: &str| !segment.is_empty() && segment != "." && segment != "..";
    let mut out = String::new();
    let mut segment = String::new();
    loop {
        let c = HARD_CHARS[rng.random_range(0..HARD_CHARS.len())];
        let len = out.len() + segment.len() + c.len();
        let fits = len < budget || (len == budget && valid(&(segment.clone() + c)));
        if !fits {
            if valid(&segment) {
                break;
            }
            // The segment is empty, `.` or `..` with a byte or more left: another
            // character will fit.
            continue;
        }
        segment.push_str(c);
        if valid(&segment) && rng.random_bool(0.1) && out.len() + segment.len() + 1 < budget {
            out.push_str(&segment);
            out.push('/');
            segment.clear();
        }
    }
    out.push_str(&segment);
    debug_assert!(out.len() <= budget);
    out
}

/// The `(host, seq, poison)` an object name was made from, if it starts like one.
/// The caller compares the whole name with [`Shape::name`].
pub fn parse_object_name(name: &str) -> Option<(u32, u64, bool)> {
    let (poison, rest) = match name.strip_prefix(POISON_PREFIX) {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    let (host, rest) = rest.strip_prefix('h')?.split_once('/')?;
    let seq = rest.get(..10)?;
    if !(rest.len() == 10 || rest[10..].starts_with('/'))
        || !seq.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((host.parse().ok()?, seq.parse().ok()?, poison))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(hard: bool) -> Shape {
        Shape {
            hard_names: hard,
            attributes: true,
            conflicts: 0.5,
            overwrites: 0.0,
            seed: 7,
        }
    }

    #[test]
    fn overwrites_take_a_recent_name_of_their_host_in_their_share() {
        let never = shape(false);
        let shape = Shape {
            overwrites: 0.3,
            ..shape(true)
        };
        let mut overwrites = 0;
        for seq in 0..2000 {
            let name = shape.name(2, seq, false);
            let first = shape.first_of_name(2, seq);
            assert!(first <= seq);
            assert_eq!(parse_object_name(&name), Some((2, first, false)));
            if let Some(earlier) = shape.overwritten(2, seq) {
                overwrites += 1;
                assert!(
                    (seq.saturating_sub(OVERWRITE_RECENT)..seq).contains(&earlier),
                    "{seq}: {earlier}"
                );
                assert_eq!(name, shape.name(2, earlier, false));
            } else {
                assert_eq!(first, seq);
            }
        }
        assert!((500..700).contains(&overwrites), "{overwrites} of 2000");
        assert_eq!(shape.overwritten(2, 0), None);
        assert_eq!(never.overwritten(2, 10), None);
    }

    #[test]
    fn names_parse_back_and_stay_within_the_rules() {
        for hard in [false, true] {
            for seq in 0..2000 {
                for poison in [false, true] {
                    let name = shape(hard).name(3, seq, poison);
                    assert_eq!(parse_object_name(&name), Some((3, seq, poison)), "{name:?}");
                    assert!(spool::name::check(&name).is_ok(), "{name:?}");
                    let path = object_store::path::Path::parse(&name).unwrap();
                    assert_eq!(path.as_ref(), name, "the client would rewrite {name:?}");
                }
            }
        }
        let long = (0..2000)
            .map(|s| shape(true).name(0, s, false).len())
            .max()
            .unwrap();
        assert!(long > 900, "no name near the limit: {long}");
    }

    #[test]
    fn hard_segment_paths_stay_within_their_budget() {
        for budget in 1..=1024 {
            for seed in 0..50 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let path = hard_segment_path(&mut rng, budget);
                assert!(path.len() <= budget, "{budget}: {} bytes", path.len());
                let parsed = object_store::path::Path::parse(&path);
                assert_eq!(parsed.map(String::from).ok(), Some(path));
            }
        }
    }

    #[test]
    fn plain_names_are_as_before() {
        assert_eq!(shape(false).name(1, 42, false), "h1/0000000042");
        assert_eq!(shape(false).name(0, 7, true), "poison/h0/0000000007");
        for bad in [
            "h1/12",
            "x1/0000000001",
            "h1/000000000a",
            "poison/x",
            "h1/00000000011",
        ] {
            assert_eq!(parse_object_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn another_writer_of_an_empty_payload_has_other_bytes() {
        let always = Shape {
            conflicts: 1.0,
            ..shape(false)
        };
        let empty = Bytes::new();
        for seq in 0..200 {
            let other = always.other_writer(0, seq, false, &empty).unwrap();
            match always.conflict(0, seq).unwrap() {
                Conflict::SameBytes => assert!(other.bytes.is_empty()),
                Conflict::SameSize | Conflict::OtherSize => assert_eq!(other.bytes.len(), 1),
            }
        }
    }

    #[test]
    fn every_kind_of_conflict_is_drawn() {
        let kinds: Vec<Option<Conflict>> = (0..200).map(|s| shape(false).conflict(0, s)).collect();
        for kind in [
            None,
            Some(Conflict::SameBytes),
            Some(Conflict::SameSize),
            Some(Conflict::OtherSize),
        ] {
            assert!(kinds.contains(&kind), "{kind:?} never drawn");
        }
    }
}
