//! What every writer was told: the writers' logs read back into one attempt per
//! upload (its `begin` line joined with its `end` line, if any).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Deserialize;

/// What the client call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The call resolved: the write was acknowledged.
    Ok,
    /// The call failed with this text (and HTTP code, when the client gave one).
    Error { text: String, code: Option<u16> },
    /// No answer: in flight when its writer stopped.
    Unfinished,
}

/// One upload a writer began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub writer: String,
    pub seq: u64,
    /// `media`, `multipart`, `resumable` or `xml`.
    pub kind: String,
    pub name: String,
    pub size: u64,
    pub md5: String,
    pub crc32c: String,
    pub content_type: String,
    pub cache_control: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub answer: Answer,
    /// For a failed Node upload: what the client's last resumable status query got
    /// (`None`: none was sent).
    pub status_query: Option<StatusQuery>,
}

/// What a resumable status query (`PUT`, `Content-Range: bytes */*`) got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusQuery {
    /// It failed without an answer (a reset connection, a refused one).
    Unanswered,
    /// The server answered with this status (308: incomplete; 200: complete).
    Answered(u16),
}

impl Attempt {
    /// The client it went through: the writer's name without its index (`node`,
    /// `python`, `object-store`).
    pub fn client(&self) -> &str {
        client_of(&self.writer)
    }
}

/// `node-1` -> `node`, `object-store-0` -> `object-store`.
fn client_of(writer: &str) -> &str {
    writer.rsplit_once('-').map_or(writer, |(client, _)| client)
}

/// One log line, `begin` or `end`.
#[derive(Debug, Deserialize)]
struct Line {
    ev: String,
    writer: String,
    seq: u64,
    #[serde(default)]
    name: String,
    kind: Option<String>,
    size: Option<u64>,
    md5: Option<String>,
    crc32c: Option<String>,
    #[serde(rename = "contentType")]
    content_type: Option<String>,
    #[serde(rename = "cacheControl")]
    cache_control: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    answer: Option<String>,
    error: Option<String>,
    code: Option<u16>,
    #[serde(rename = "lastStatusQuery")]
    last_status_query: Option<serde_json::Value>,
}

/// An exception a client threw outside the promise of an upload (Node's streams
/// emitting an unhandled `error`), logged by its writer as `ev: "uncaught"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncaught {
    pub writer: String,
    /// The upload in progress then (or the next one, between uploads).
    pub seq: u64,
    pub text: String,
}

/// A connection a client tried and the server refused (ECONNREFUSED), logged by its
/// writer as `ev: "refused"` when it happened: the official clients retry a
/// refused request themselves, so the upload may still end `ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub writer: String,
    /// The upload in progress then.
    pub seq: u64,
    pub text: String,
}

impl Refused {
    /// The client: the writer's name without its index.
    pub fn client(&self) -> &str {
        client_of(&self.writer)
    }
}

/// Every attempt in the writers' logs, the exceptions thrown outside them, the
/// connections refused, and the lines that could not be read (a line cut short by
/// a writer killed while writing it).
#[derive(Debug, Default)]
pub struct Ledger {
    pub attempts: Vec<Attempt>,
    pub uncaught: Vec<Uncaught>,
    pub refused: Vec<Refused>,
    pub unreadable: Vec<String>,
}

impl Ledger {
    /// Reads `files` (JSON lines).
    pub fn read(files: &[PathBuf]) -> anyhow::Result<Self> {
        let mut ledger = Ledger::default();
        for file in files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            ledger.add_lines(&text, &file.display().to_string());
        }
        Ok(ledger)
    }

    /// Adds the lines of one log (`source` names it in complaints).
    pub fn add_lines(&mut self, text: &str, source: &str) {
        // (writer, seq) -> index in attempts
        let mut open: BTreeMap<(String, u64), usize> = BTreeMap::new();
        for (number, raw) in text.lines().enumerate() {
            let line: Line = match serde_json::from_str(raw) {
                Ok(line) => line,
                Err(e) => {
                    self.unreadable
                        .push(format!("{source}:{}: {e}: {raw:.200}", number + 1));
                    continue;
                }
            };
            let key = (line.writer.clone(), line.seq);
            if line.ev == "uncaught" {
                self.uncaught.push(Uncaught {
                    writer: line.writer,
                    seq: line.seq,
                    text: line.error.unwrap_or_default(),
                });
            } else if line.ev == "refused" {
                self.refused.push(Refused {
                    writer: line.writer,
                    seq: line.seq,
                    text: line.error.unwrap_or_default(),
                });
            } else if line.ev == "begin" {
                open.insert(key, self.attempts.len());
                self.attempts.push(begin(line));
            } else if let Some(&index) = open.get(&key) {
                self.attempts[index].status_query =
                    line.last_status_query
                        .as_ref()
                        .map(|q| match q["status"].as_u64() {
                            Some(status) if q["answered"] == true => {
                                StatusQuery::Answered(status as u16)
                            }
                            _ => StatusQuery::Unanswered,
                        });
                self.attempts[index].answer = match line.answer.as_deref() {
                    Some("ok") => Answer::Ok,
                    _ => Answer::Error {
                        text: line.error.unwrap_or_default(),
                        code: line.code,
                    },
                };
            } else {
                self.unreadable
                    .push(format!("{source}:{}: an end without a begin", number + 1));
            }
        }
    }
}

fn begin(line: Line) -> Attempt {
    Attempt {
        writer: line.writer,
        seq: line.seq,
        kind: line.kind.unwrap_or_default(),
        name: line.name,
        size: line.size.unwrap_or_default(),
        md5: line.md5.unwrap_or_default(),
        crc32c: line.crc32c.unwrap_or_default(),
        content_type: line.content_type.unwrap_or_default(),
        cache_control: line.cache_control,
        metadata: line.metadata.unwrap_or_default(),
        answer: Answer::Unfinished,
        status_query: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"ev":"begin","writer":"node-0","seq":0,"name":"a","kind":"media","size":1,"md5":"m","crc32c":"c","contentType":"t","cacheControl":null,"metadata":null}
{"ev":"end","writer":"node-0","seq":0,"name":"a","answer":"ok","ms":3}
{"ev":"begin","writer":"node-0","seq":1,"name":"b","kind":"resumable","size":2,"md5":"m","crc32c":"c","contentType":"t","cacheControl":"no-store","metadata":{"k":"v"}}
{"ev":"end","writer":"node-0","seq":1,"name":"b","answer":"error","error":"boom","code":503,"ms":3,"lastStatusQuery":{"answered":false,"error":"socket hang up"}}
{"ev":"uncaught","writer":"node-0","seq":2,"t":5,"error":"RangeError: lost"}
{"ev":"refused","writer":"node-0","seq":2,"t":6,"error":"connect ECONNREFUSED 127.0.0.1:9"}
{"ev":"begin","writer":"node-0","seq":2,"name":"c","kind":"multipart","size":2,"md5":"m","crc32c":"c","contentType":"t","cacheControl":null,"metadata":{}}
{"ev":"beg"#;

    #[test]
    fn begins_and_ends_join_into_attempts_with_their_answers() {
        let mut ledger = Ledger::default();
        ledger.add_lines(LOG, "node-0.jsonl");
        let answers: Vec<&Answer> = ledger.attempts.iter().map(|a| &a.answer).collect();
        let boom = Answer::Error {
            text: "boom".into(),
            code: Some(503),
        };
        assert_eq!(answers, [&Answer::Ok, &boom, &Answer::Unfinished]);
        assert_eq!(
            ledger.attempts[1].metadata.get("k").map(String::as_str),
            Some("v")
        );
        assert_eq!(
            ledger.attempts[1].cache_control.as_deref(),
            Some("no-store")
        );
        assert_eq!(ledger.attempts[0].client(), "node");
        assert_eq!(ledger.attempts[0].status_query, None);
        assert_eq!(
            ledger.attempts[1].status_query,
            Some(StatusQuery::Unanswered)
        );
        assert_eq!(ledger.unreadable.len(), 1, "{:?}", ledger.unreadable);
        assert!(ledger.unreadable[0].starts_with("node-0.jsonl:8:"));
        let thrown = Uncaught {
            writer: "node-0".into(),
            seq: 2,
            text: "RangeError: lost".into(),
        };
        assert_eq!(ledger.uncaught, [thrown]);
        // A refused connection is counted apart, and ends no upload.
        assert_eq!(ledger.refused.len(), 1);
        assert_eq!(ledger.refused[0].client(), "node");
        assert_eq!(ledger.refused[0].seq, 2);
        assert_eq!(ledger.attempts[2].answer, Answer::Unfinished);
    }
}
