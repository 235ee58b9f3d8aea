//! The session files in `sessions/`: their names and their formats.
//!
//! | file | what |
//! |---|---|
//! | `ID.session` | [`OpeningFile`]: the opening request and its time |
//! | `ID.OFFSET.LEN.CRC.chunk` | bytes `OFFSET..OFFSET+LEN` (OFFSET 20 digits, CRC 8 hex digits) |
//! | `ID.OFFSET.N.partial` | a chunk arriving (the N-th partial file of this run) |
//! | `ID.done` | [`DoneFile`]: the final answer, its time, the session's bucket and opening time |
//!
//! Both JSON files are serde structs in one key style (camelCase) with a format
//! `version`; files written before it existed (version 1: no `version`, `finished_ms`
//! in snake case, and a `.done` that needs its `.session`) are still read.

use serde::{Deserialize, Serialize};

use super::Chunk;

/// The format version of the session files written now.
pub(crate) const FORMAT_VERSION: u32 = 2;

fn version_1() -> u32 {
    1
}

/// `ID.session`: what a session was opened with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OpeningFile {
    /// 1 when absent.
    #[serde(default = "version_1")]
    pub(crate) version: u32,
    pub(crate) bucket: String,
    /// The query string as the client sent it.
    pub(crate) query: String,
    pub(crate) upload_content_type: Option<String>,
    /// The JSON resource the opening request carried (may be empty).
    pub(crate) resource: String,
    /// When it was opened (Unix ms).
    pub(crate) created_ms: u64,
    /// The upstream it writes to (see [`crate::RelayConfig::upstream`]); absent in
    /// version 1, whose sessions complete into whichever upstream the relay has.
    #[serde(default)]
    pub(crate) upstream: Option<String>,
}

/// `ID.done`: a completed session's answer, kept for a retried final request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DoneFile {
    /// 1 when absent.
    #[serde(default = "version_1")]
    pub(crate) version: u32,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
    /// When the upload was made safe (Unix ms); version 1 wrote `finished_ms`, or
    /// nothing (0: the opening's time stands in).
    #[serde(default, alias = "finished_ms")]
    pub(crate) finished_ms: u64,
    /// The session's bucket and opening time (version 2), so that a completed
    /// session needs no `ID.session`.
    #[serde(default)]
    pub(crate) bucket: Option<String>,
    #[serde(default)]
    pub(crate) created_ms: Option<u64>,
    #[serde(default)]
    pub(crate) upstream: Option<String>,
}

/// `ID.session`.
pub(crate) fn opening_name(id: &str) -> String {
    format!("{id}.session")
}

/// `ID.done`.
pub(crate) fn done_name(id: &str) -> String {
    format!("{id}.done")
}

/// Where a request writes the chunk it brings at `offset`: unique in this run (`n`),
/// so that a file an earlier request left behind is never appended to.
pub(crate) fn partial_name(id: &str, offset: u64, n: u64) -> String {
    format!("{id}.{offset:020}.{n}.partial")
}

impl Chunk {
    /// Its file's name.
    pub(crate) fn file_name(&self, id: &str) -> String {
        format!(
            "{id}.{:020}.{}.{:08x}.chunk",
            self.offset, self.len, self.crc32c
        )
    }
}

/// The session ID a file belongs to.
pub(crate) fn id_of(name: &str) -> &str {
    name.split('.').next().unwrap_or_default()
}

/// A chunk file's name, parsed; `None` for any other file.
pub(crate) fn parse_chunk_name(id: &str, name: &str) -> Option<Chunk> {
    let rest = name
        .strip_prefix(id)?
        .strip_prefix('.')?
        .strip_suffix(".chunk")?;
    let mut parts = rest.split('.');
    let offset = parts.next()?.parse().ok()?;
    let len = parts.next()?.parse().ok()?;
    let crc32c = u32::from_str_radix(parts.next()?, 16).ok()?;
    let chunk = Chunk {
        offset,
        len,
        crc32c,
    };
    // An end past u64::MAX is no chunk this relay wrote.
    offset.checked_add(len)?;
    parts.next().is_none().then_some(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_names_round_trip_and_foreign_names_are_not_chunks() {
        let chunk = Chunk {
            offset: 262_144,
            len: 1000,
            crc32c: 0xdead_beef,
        };
        let name = chunk.file_name("abc");
        assert_eq!(name, "abc.00000000000000262144.1000.deadbeef.chunk");
        assert_eq!(parse_chunk_name("abc", &name), Some(chunk));
        assert_eq!(parse_chunk_name("ab", &name), None);
        assert_eq!(parse_chunk_name("abc", &partial_name("abc", 0, 3)), None);
        assert_eq!(parse_chunk_name("abc", "abc.session"), None);
        let overflowing = format!("abc.{}.2.00000000.chunk", u64::MAX);
        assert_eq!(parse_chunk_name("abc", &overflowing), None);
        assert_eq!(id_of(&name), "abc");
    }

    #[test]
    fn version_1_files_are_still_read() {
        let opening = r#"{"bucket":"b","query":"uploadType=resumable&name=a","uploadContentType":null,"resource":"","createdMs":7}"#;
        let read: OpeningFile = serde_json::from_str(opening).unwrap();
        assert_eq!((read.version, read.created_ms, read.upstream), (1, 7, None));
        let done = r#"{"status":200,"headers":[["x-spool-outcome","spooled"]],"body":"{}","finished_ms":9}"#;
        let read: DoneFile = serde_json::from_str(done).unwrap();
        assert_eq!((read.version, read.finished_ms), (1, 9));
        assert_eq!(read.bucket, None);
        assert_eq!(read.headers, [("x-spool-outcome".into(), "spooled".into())]);
        let written = serde_json::to_string(&DoneFile {
            version: FORMAT_VERSION,
            ..read
        })
        .unwrap();
        assert!(written.contains("\"finishedMs\":9") && !written.contains("finished_ms"));
    }
}
