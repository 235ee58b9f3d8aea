//! The checker: what every writer was told against what the bucket holds.
//!
//! - Every attempt answered `ok` is in the bucket under its exact name with its
//!   size, MD5, crc32c, content type, cache control and custom metadata; otherwise
//!   it is lost (missing, other bytes, or other attributes).
//! - Every object in the bucket is an attempt of some writer (acknowledged or not,
//!   or in flight at the end) with that attempt's size and MD5; otherwise it is
//!   unexpected: something no one wrote.
//! - An error that says the client gave up because the server lost bytes it had
//!   counted (Node's "... this could result in data loss", Python's "Bytes stream
//!   is in unexpected state"), or answered with checksums of other bytes than those
//!   sent (Node's "The uploaded data did not match ...", Python's
//!   `DataCorruption`), is a failure of its own: the relay forgot or changed what
//!   it had acknowledged. Except when the Node client's last status query had
//!   failed without an answer: it then gives up with the same words whatever the
//!   server holds (a client bug, clients/torture/node_status_query_reset.js), and
//!   such an upload is reported apart; so is one whose status query was answered
//!   200 (complete) and whose object is in the bucket as written (the same client
//!   code takes that answer for 0 bytes).

use std::collections::{BTreeMap, BTreeSet};

use crate::fake::Object;
use crate::ledger::{Answer, Attempt, StatusQuery, Uncaught};

/// Texts of client errors that mean the server lost bytes it had acknowledged, or
/// answered with the checksums of other bytes than the client sent.
pub const LOST_BYTES_ERRORS: &[&str] = &[
    // Node: a resumed session has fewer bytes than 308s counted.
    "could result in data loss",
    // Python: the same.
    "Bytes stream is in unexpected state",
    // Node: the answer's crc32c or MD5 is not the data's.
    "The uploaded data did not match the data from the server",
    // Python: the same (DataCorruption), also when only seen as the context of the
    // delete the client then attempts.
    "DataCorruption",
];

/// What the check found; every list must be empty.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Acknowledged writes not in the bucket as written, each described.
    pub lost: Vec<Lost>,
    /// Objects no writer wrote, each described.
    pub unexpected: Vec<String>,
    /// Uploads a client aborted because the server lost acknowledged bytes.
    pub aborted_for_lost_bytes: Vec<String>,
    /// Node uploads that ended with the same words although no server said so: the
    /// client's status query had failed without an answer (a client bug,
    /// clients/torture/node_status_query_reset.js). Reported, not failures: the
    /// writer was told an error, not that its write was safe.
    pub client_gave_up_unanswered: Vec<String>,
    /// Node uploads given up the same way after the status query answered 200: the
    /// upload was complete (its answer had been lost) and the object is in the
    /// bucket as written, but the client takes a 200 to a status query for "0 bytes"
    /// (the same client code). Reported, not failures.
    pub client_gave_up_complete: Vec<String>,
}

/// One acknowledged write that the bucket does not hold as written.
#[derive(Debug, PartialEq, Eq)]
pub struct Lost {
    /// `client kind`, e.g. `node resumable`.
    pub what: String,
    pub name: String,
    /// What differs: `missing`, or the fields.
    pub why: String,
}

impl Findings {
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.unexpected.is_empty() && self.aborted_for_lost_bytes.is_empty()
    }
}

/// Checks `attempts` against the bucket's `objects`; `uncaught` are exceptions the
/// clients threw outside an upload's promise (checked for lost bytes too).
pub fn check(attempts: &[Attempt], uncaught: &[Uncaught], objects: &[Object]) -> Findings {
    let by_name: BTreeMap<&str, &Object> = objects.iter().map(|o| (o.name.as_str(), o)).collect();
    let mut tried: BTreeMap<&str, Vec<&Attempt>> = BTreeMap::new();
    for attempt in attempts {
        tried.entry(&attempt.name).or_default().push(attempt);
    }
    let mut findings = Findings::default();
    // (writer, seq) of every upload whose error was judged: thrown exceptions of
    // the same upload are not counted again.
    let mut judged: BTreeSet<(&str, u64)> = BTreeSet::new();
    for attempt in attempts {
        if let Answer::Error { text, .. } = &attempt.answer
            && lost_bytes(text)
        {
            judged.insert((&attempt.writer, attempt.seq));
            let what = format!("{} {:?}: {text}", attempt.writer, attempt.name);
            let stored = by_name
                .get(attempt.name.as_str())
                .is_some_and(|o| differences(attempt, o).is_empty());
            match attempt.status_query {
                Some(StatusQuery::Unanswered) => findings.client_gave_up_unanswered.push(what),
                Some(StatusQuery::Answered(200 | 201)) if stored => {
                    findings.client_gave_up_complete.push(what)
                }
                _ => findings.aborted_for_lost_bytes.push(what),
            }
        }
        if attempt.answer != Answer::Ok {
            continue;
        }
        let why = match by_name.get(attempt.name.as_str()) {
            None => "missing".to_string(),
            Some(object) => differences(attempt, object).join(", "),
        };
        if !why.is_empty() {
            findings.lost.push(Lost {
                what: format!("{} {}", attempt.client(), attempt.kind),
                name: attempt.name.clone(),
                why,
            });
        }
    }
    for thrown in uncaught {
        if lost_bytes(&thrown.text) && !judged.contains(&(thrown.writer.as_str(), thrown.seq)) {
            let what = format!(
                "{} upload {} (thrown): {}",
                thrown.writer, thrown.seq, thrown.text
            );
            findings.aborted_for_lost_bytes.push(what);
        }
    }
    for object in objects {
        let written = tried.get(object.name.as_str()).is_some_and(|all| {
            all.iter()
                .any(|a| a.size == object.size && object.md5.as_deref() == Some(a.md5.as_str()))
        });
        if !written {
            findings.unexpected.push(format!(
                "{:?} ({} bytes, md5 {:?}): {}",
                object.name,
                object.size,
                object.md5,
                if tried.contains_key(object.name.as_str()) {
                    "bytes no writer sent under this name"
                } else {
                    "a name no writer used"
                }
            ));
        }
    }
    findings
}

/// Whether a client's error text says it gave up for lost or changed bytes.
fn lost_bytes(text: &str) -> bool {
    LOST_BYTES_ERRORS.iter().any(|e| text.contains(e))
}

/// The fields in which `object` differs from what `attempt` wrote.
fn differences(attempt: &Attempt, object: &Object) -> Vec<String> {
    let mut out = Vec::new();
    if object.size != attempt.size {
        out.push(format!("size {} (wrote {})", object.size, attempt.size));
    }
    if object.md5.as_deref() != Some(attempt.md5.as_str()) {
        out.push(format!("md5 {:?} (wrote {})", object.md5, attempt.md5));
    }
    if object.crc32c.as_deref() != Some(attempt.crc32c.as_str()) {
        out.push(format!(
            "crc32c {:?} (wrote {})",
            object.crc32c, attempt.crc32c
        ));
    }
    if object.content_type.as_deref() != Some(attempt.content_type.as_str()) {
        out.push(format!(
            "content type {:?} (wrote {:?})",
            object.content_type, attempt.content_type
        ));
    }
    if object.cache_control != attempt.cache_control {
        out.push(format!(
            "cache control {:?} (wrote {:?})",
            object.cache_control, attempt.cache_control
        ));
    }
    if object.metadata != attempt.metadata {
        out.push(format!(
            "metadata {:?} (wrote {:?})",
            object.metadata, attempt.metadata
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(name: &str, answer: Answer) -> Attempt {
        Attempt {
            writer: "python-1".into(),
            seq: 0,
            kind: "multipart".into(),
            name: name.into(),
            size: 3,
            md5: "m".into(),
            crc32c: "c".into(),
            content_type: "text/plain".into(),
            cache_control: Some("no-store".into()),
            metadata: BTreeMap::from([("k".into(), "v".into())]),
            answer,
            status_query: None,
        }
    }

    fn object_of(a: &Attempt) -> Object {
        Object {
            name: a.name.clone(),
            size: a.size,
            md5: Some(a.md5.clone()),
            crc32c: Some(a.crc32c.clone()),
            content_type: Some(a.content_type.clone()),
            cache_control: a.cache_control.clone(),
            metadata: a.metadata.clone(),
        }
    }

    #[test]
    fn acknowledged_writes_present_as_written_and_unacknowledged_ones_anywhere_pass() {
        let ok = attempt("a é/#?", Answer::Ok);
        let failed = attempt(
            "b",
            Answer::Error {
                text: "503".into(),
                code: Some(503),
            },
        );
        let unfinished = attempt("c", Answer::Unfinished);
        let objects = [object_of(&ok), object_of(&unfinished)];
        assert!(check(&[ok, failed, unfinished], &[], &objects).is_clean());
    }

    #[test]
    fn a_missing_or_different_acknowledged_write_is_lost() {
        let ok = attempt("a", Answer::Ok);
        let missing = check(std::slice::from_ref(&ok), &[], &[]);
        assert_eq!(missing.lost.len(), 1);
        assert_eq!(missing.lost[0].why, "missing");
        assert_eq!(missing.lost[0].what, "python multipart");

        let mut bytes = object_of(&ok);
        bytes.md5 = Some("other".into());
        let found = check(std::slice::from_ref(&ok), &[], &[bytes]);
        assert!(found.lost[0].why.contains("md5"), "{:?}", found.lost);
        // Bytes no one sent under the name are also unexpected.
        assert_eq!(found.unexpected.len(), 1);

        let mut attributes = object_of(&ok);
        attributes.metadata.clear();
        attributes.cache_control = None;
        let found = check(&[ok], &[], &[attributes]);
        assert!(found.lost[0].why.contains("metadata"));
        assert!(found.lost[0].why.contains("cache control"));
        assert!(found.unexpected.is_empty());
    }

    #[test]
    fn an_object_no_writer_began_is_unexpected() {
        let stray = object_of(&attempt("nobody", Answer::Ok));
        let found = check(&[], &[], &[stray]);
        assert_eq!(found.unexpected.len(), 1);
        assert!(found.unexpected[0].contains("a name no writer used"));
    }

    #[test]
    fn a_client_giving_up_for_lost_bytes_is_a_failure() {
        let text = "The offset is lower than the number of bytes written. The server has 0 bytes \
                    ... Stopping as this could result in data loss.";
        let aborted = attempt(
            "r",
            Answer::Error {
                text: text.into(),
                code: None,
            },
        );
        let thrown = Uncaught {
            writer: aborted.writer.clone(),
            seq: aborted.seq,
            text: format!("RangeError: {text}"),
        };
        // Thrown and rejected for the same upload: one abort.
        let found = check(&[aborted], std::slice::from_ref(&thrown), &[]);
        assert_eq!(found.aborted_for_lost_bytes.len(), 1);
        assert!(!found.is_clean());
        // Thrown alone (between uploads): still an abort.
        let found = check(&[], std::slice::from_ref(&thrown), &[]);
        assert_eq!(found.aborted_for_lost_bytes.len(), 1);
    }

    #[test]
    fn a_node_client_giving_up_after_its_own_status_query_failed_is_told_apart() {
        let text = "The offset is lower than the number of bytes written. The server has 0 bytes \
                    ... Stopping as this could result in data loss.";
        let mut gave_up = attempt(
            "r",
            Answer::Error {
                text: text.into(),
                code: None,
            },
        );
        gave_up.status_query = Some(StatusQuery::Unanswered);
        let thrown = Uncaught {
            writer: gave_up.writer.clone(),
            seq: gave_up.seq,
            text: text.into(),
        };
        let found = check(std::slice::from_ref(&gave_up), &[thrown], &[]);
        assert!(found.is_clean(), "{found:?}");
        assert_eq!(found.client_gave_up_unanswered.len(), 1);
        // Answered 200 (complete), the object in the bucket as written: reported
        // apart; not in the bucket: an abort (the 200 said it was safe).
        gave_up.status_query = Some(StatusQuery::Answered(200));
        let found = check(std::slice::from_ref(&gave_up), &[], &[object_of(&gave_up)]);
        assert!(found.is_clean(), "{found:?}");
        assert_eq!(found.client_gave_up_complete.len(), 1);
        let found = check(std::slice::from_ref(&gave_up), &[], &[]);
        assert_eq!(found.aborted_for_lost_bytes.len(), 1);
        // Answered 308 with fewer bytes: an abort.
        gave_up.status_query = Some(StatusQuery::Answered(308));
        let found = check(&[gave_up], &[], &[]);
        assert_eq!(found.aborted_for_lost_bytes.len(), 1);
        assert!(found.client_gave_up_unanswered.is_empty());
    }
}
