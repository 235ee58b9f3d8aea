//! Google's storage-testbench control API (`/retry_test`, `x-retry-test-id`): tests
//! of scripted [`Instruction`]s, consumed one per request.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use http::Method;
use serde_json::{Value, json};

use crate::wire::{Api, Operation, Reply, Route, error_reply};

/// One instruction of Google's storage-testbench fault vocabulary, for scripting
/// single requests.
///
/// A test registers instructions per operation (`POST /retry_test` with
/// `{"instructions": {"storage.objects.insert": ["return-503", ...]}}`, or
/// [`FakeGcs::create_retry_test`](crate::FakeGcs::create_retry_test)); each request
/// that carries `x-retry-test-id: <id>` consumes the next instruction for its
/// operation. [`FakeGcs::script`](crate::FakeGcs::script) queues instructions that
/// any request of the operation consumes, header or not. Scripted instructions take
/// precedence over the capacity model and the fault windows.
///
/// Instructions (sizes: `K` = KiB, as the testbench uses, or `B` = bytes):
///
/// | instruction | a resumable session's requests | other requests with a body (uploads) | requests without one (gets, lists) |
/// |---|---|---|---|
/// | `return-N` | answer N | read the body, answer N | answer N |
/// | `return-reset-connection` | drop the connection | drop the connection | drop the connection |
/// | `return-broken-stream` | read the body, drop the connection | read the body, drop the connection | send half the response body, drop |
/// | `return-N-after-MK` | once the session has M KiB in all: keep the bytes up to M KiB, answer N | read M KiB, answer N | send M KiB of the response, drop |
/// | `return-broken-stream-after-MK` | once the session has M KiB: keep them, drop the connection | read M KiB, drop | send M KiB of the response, drop |
/// | `stall-for-Ts-after-MK` | once the session has M KiB: wait T seconds, carry on | read M KiB, wait T seconds, carry on | send M KiB, wait T seconds, carry on |
/// | `return-broken-stream-final-chunk-after-NB` | on the request that completes the upload (or asks a completed session again): store the object, send N bytes of the answer, drop | stays queued (as in the testbench) | stays queued |
///
/// A session's `-after-` instructions count the bytes the session has received in
/// all, as the testbench does, so they never fire on the request that opens the
/// session and they force the client to ask the session where it stands and
/// resume part-way. They stay queued until a request brings the session to M KiB.
///
/// Bounded: at most `Limits::max_retry_tests` tests are kept; the oldest is
/// forgotten first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instruction {
    /// `return-N`: answer with status N (400..=599).
    Return(u16),
    /// `return-reset-connection`: drop the connection without answering.
    ResetConnection,
    /// `return-broken-stream`: break the stream mid-transfer.
    BrokenStream,
    /// `return-N-after-MK`: move M KiB, then answer N (see the module table).
    ReturnAfter {
        /// The status.
        status: u16,
        /// Bytes moved first.
        after_bytes: u64,
    },
    /// `return-broken-stream-after-MK`: move M KiB, then drop the connection.
    BrokenStreamAfter {
        /// Bytes moved first.
        after_bytes: u64,
    },
    /// `stall-for-Ts-after-MK`: move M KiB, wait T, carry on.
    StallAfter {
        /// How long to wait.
        hold: Duration,
        /// Bytes moved first.
        after_bytes: u64,
    },
    /// `return-broken-stream-final-chunk-after-NB`: the request that completes a
    /// resumable upload stores the object, then its answer breaks after N bytes.
    BrokenStreamFinalChunkAfter {
        /// Bytes of the answer sent.
        after_bytes: u64,
    },
}

impl Instruction {
    /// Whether, on a resumable session's requests, the instruction counts the
    /// session's bytes (or waits for its last request) rather than acting when the
    /// request arrives.
    pub(crate) fn counts_session_bytes(&self) -> bool {
        matches!(
            self,
            Instruction::ReturnAfter { .. }
                | Instruction::BrokenStreamAfter { .. }
                | Instruction::StallAfter { .. }
                | Instruction::BrokenStreamFinalChunkAfter { .. }
        )
    }

    /// Whether it acts only on a resumable session's requests.
    pub(crate) fn only_for_sessions(&self) -> bool {
        matches!(self, Instruction::BrokenStreamFinalChunkAfter { .. })
    }
}

fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = digits.parse().ok()?;
    match unit {
        "K" | "KiB" => n.checked_mul(1024),
        "M" | "MiB" => n.checked_mul(1024 * 1024),
        "B" => Some(n),
        _ => None,
    }
}

fn fmt_size(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(1024) {
        format!("{}K", bytes / 1024)
    } else {
        format!("{bytes}B")
    }
}

fn parse_status(s: &str) -> Option<u16> {
    let status: u16 = s.parse().ok()?;
    (400..=599).contains(&status).then_some(status)
}

impl FromStr for Instruction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("unknown retry-test instruction {s:?}");
        if s == "return-reset-connection" {
            return Ok(Instruction::ResetConnection);
        }
        if s == "return-broken-stream" {
            return Ok(Instruction::BrokenStream);
        }
        if let Some(size) = s.strip_prefix("return-broken-stream-final-chunk-after-") {
            let after_bytes = size
                .strip_suffix('B')
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)?;
            return Ok(Instruction::BrokenStreamFinalChunkAfter { after_bytes });
        }
        if let Some(size) = s.strip_prefix("return-broken-stream-after-") {
            let after_bytes = parse_size(size).ok_or_else(bad)?;
            return Ok(Instruction::BrokenStreamAfter { after_bytes });
        }
        if let Some(rest) = s.strip_prefix("stall-for-") {
            let (secs, size) = rest.split_once("s-after-").ok_or_else(bad)?;
            let secs: u64 = secs.parse().map_err(|_| bad())?;
            let after_bytes = parse_size(size).ok_or_else(bad)?;
            return Ok(Instruction::StallAfter {
                hold: Duration::from_secs(secs),
                after_bytes,
            });
        }
        if let Some(rest) = s.strip_prefix("return-") {
            if let Some((status, size)) = rest.split_once("-after-") {
                let status = parse_status(status).ok_or_else(bad)?;
                let after_bytes = parse_size(size).ok_or_else(bad)?;
                return Ok(Instruction::ReturnAfter {
                    status,
                    after_bytes,
                });
            }
            return parse_status(rest).map(Instruction::Return).ok_or_else(bad);
        }
        Err(bad())
    }
}

impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Instruction::Return(status) => write!(f, "return-{status}"),
            Instruction::ResetConnection => f.write_str("return-reset-connection"),
            Instruction::BrokenStream => f.write_str("return-broken-stream"),
            Instruction::ReturnAfter {
                status,
                after_bytes,
            } => write!(f, "return-{status}-after-{}", fmt_size(after_bytes)),
            Instruction::BrokenStreamAfter { after_bytes } => {
                write!(f, "return-broken-stream-after-{}", fmt_size(after_bytes))
            }
            Instruction::StallAfter { hold, after_bytes } => write!(
                f,
                "stall-for-{}s-after-{}",
                hold.as_secs(),
                fmt_size(after_bytes)
            ),
            Instruction::BrokenStreamFinalChunkAfter { after_bytes } => {
                write!(f, "return-broken-stream-final-chunk-after-{after_bytes}B")
            }
        }
    }
}

/// A registered test: the instructions left per operation name.
#[derive(Debug, Clone)]
struct RetryTest {
    instructions: BTreeMap<String, VecDeque<Instruction>>,
    transport: String,
}

/// The registry of retry tests and scripted instructions.
#[derive(Debug)]
pub(crate) struct RetryTests {
    tests: BTreeMap<u64, RetryTest>,
    next_id: u64,
    max_tests: usize,
    scripted: BTreeMap<Operation, VecDeque<Instruction>>,
}

/// `x-retry-test-id` named a test the fake does not know.
#[derive(Debug)]
pub(crate) struct UnknownTest;

impl RetryTests {
    pub(crate) fn new(max_tests: usize) -> Self {
        Self {
            tests: BTreeMap::new(),
            next_id: 1,
            max_tests: max_tests.max(1),
            scripted: BTreeMap::new(),
        }
    }

    fn id_string(id: u64) -> String {
        format!("rt-{id:08}")
    }

    fn parse_id(id: &str) -> Option<u64> {
        id.strip_prefix("rt-")?.parse().ok()
    }

    /// Registers a test; returns its id.
    pub(crate) fn create(
        &mut self,
        instructions: BTreeMap<String, Vec<Instruction>>,
        transport: String,
    ) -> String {
        while self.tests.len() >= self.max_tests {
            self.tests.pop_first();
        }
        let id = self.next_id;
        self.next_id += 1;
        let instructions = instructions
            .into_iter()
            .map(|(op, list)| (op, list.into_iter().collect()))
            .collect();
        self.tests.insert(
            id,
            RetryTest {
                instructions,
                transport,
            },
        );
        Self::id_string(id)
    }

    /// Registers a test from the testbench's JSON body.
    pub(crate) fn create_json(&mut self, body: &[u8]) -> Result<Value, String> {
        let body: Value =
            serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))?;
        let map = body
            .get("instructions")
            .and_then(Value::as_object)
            .ok_or("the body needs an \"instructions\" object")?;
        let mut instructions = BTreeMap::new();
        for (op, list) in map {
            let list = list
                .as_array()
                .ok_or_else(|| format!("instructions for {op} must be an array"))?;
            let parsed = list
                .iter()
                .map(|i| {
                    i.as_str()
                        .ok_or_else(|| format!("instructions for {op} must be strings"))?
                        .parse::<Instruction>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            instructions.insert(op.clone(), parsed);
        }
        let transport = body
            .get("transport")
            .and_then(Value::as_str)
            .unwrap_or("HTTP")
            .to_string();
        let id = self.create(instructions, transport);
        Ok(self.get_json(&id).unwrap_or(Value::Null))
    }

    /// A test as the testbench shows it.
    pub(crate) fn get_json(&self, id: &str) -> Option<Value> {
        let n = Self::parse_id(id)?;
        let test = self.tests.get(&n)?;
        Some(Self::render(n, test))
    }

    fn render(id: u64, test: &RetryTest) -> Value {
        let instructions: serde_json::Map<String, Value> = test
            .instructions
            .iter()
            .map(|(op, list)| {
                let list = list.iter().map(|i| Value::String(i.to_string())).collect();
                (op.clone(), Value::Array(list))
            })
            .collect();
        let completed = test.instructions.values().all(VecDeque::is_empty);
        json!({
            "id": Self::id_string(id),
            "instructions": instructions,
            "completed": completed,
            "transport": test.transport,
        })
    }

    /// All tests, oldest first.
    pub(crate) fn list_json(&self) -> Value {
        let tests: Vec<Value> = self
            .tests
            .iter()
            .map(|(id, t)| Self::render(*id, t))
            .collect();
        json!({ "retry_test": tests })
    }

    /// Forgets a test; false when it was not there.
    pub(crate) fn delete(&mut self, id: &str) -> bool {
        Self::parse_id(id).is_some_and(|n| self.tests.remove(&n).is_some())
    }

    /// Queues instructions for any request of `op`.
    pub(crate) fn script(
        &mut self,
        op: Operation,
        instructions: impl IntoIterator<Item = Instruction>,
    ) {
        self.scripted.entry(op).or_default().extend(instructions);
    }

    /// The instruction for this request, taken off its queue, if any: the
    /// header's test first, then the scripted queue. An instruction `leave` picks
    /// stays queued and `None` is returned: the API decides on it once the request
    /// is read (a resumable session's `-after-` instructions).
    pub(crate) fn next(
        &mut self,
        test_id: Option<&str>,
        op: Operation,
        leave: impl Fn(&Instruction) -> bool,
    ) -> Result<Option<Instruction>, UnknownTest> {
        let Some(queue) = self.queue(test_id, op)? else {
            return Ok(None);
        };
        if queue.front().is_some_and(leave) {
            return Ok(None);
        }
        Ok(queue.pop_front())
    }

    /// The instruction this request would take next, left queued (an unknown test
    /// has none).
    pub(crate) fn peek(&mut self, test_id: Option<&str>, op: Operation) -> Option<Instruction> {
        self.queue(test_id, op).ok().flatten()?.front().copied()
    }

    /// Takes the instruction [`peek`](Self::peek) saw off its queue.
    pub(crate) fn pop(&mut self, test_id: Option<&str>, op: Operation) -> Option<Instruction> {
        self.queue(test_id, op).ok().flatten()?.pop_front()
    }

    /// The queue a request of `op` takes from: its test's, while that has
    /// instructions for `op`, then the scripted one; `None` when both are empty.
    fn queue(
        &mut self,
        test_id: Option<&str>,
        op: Operation,
    ) -> Result<Option<&mut VecDeque<Instruction>>, UnknownTest> {
        let RetryTests {
            tests, scripted, ..
        } = self;
        if let Some(id) = test_id {
            let test = Self::parse_id(id)
                .and_then(|n| tests.get_mut(&n))
                .ok_or(UnknownTest)?;
            if let Some(queue) = test
                .instructions
                .get_mut(op.name())
                .filter(|q| !q.is_empty())
            {
                return Ok(Some(queue));
            }
        }
        Ok(scripted.get_mut(&op).filter(|q| !q.is_empty()))
    }
}

/// A request to the control API: `POST /retry_test`, `GET /retry_test` (or
/// `/retry_tests`), `GET` or `DELETE /retry_test/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Control {
    Create,
    List,
    Get(String),
    Delete(String),
}

impl Control {
    /// The control request `method path` makes: `None` for a path outside the
    /// control API, `Some(Err(route))` (a 404) for a method its path does not take.
    pub(crate) fn parse(method: &Method, path: &str) -> Option<Result<Control, Route>> {
        let not_found = || Route::not_found(Api::Json, method, path);
        if path == "/retry_test" || path == "/retry_tests" {
            return Some(match *method {
                Method::POST if path == "/retry_test" => Ok(Control::Create),
                Method::GET => Ok(Control::List),
                _ => Err(not_found()),
            });
        }
        let id = path.strip_prefix("/retry_test/")?.to_string();
        Some(match *method {
            Method::GET => Ok(Control::Get(id)),
            Method::DELETE => Ok(Control::Delete(id)),
            _ => Err(not_found()),
        })
    }
}

impl RetryTests {
    /// Serves a control request with `body`.
    pub(crate) fn answer(&mut self, control: &Control, body: &[u8]) -> Reply {
        let no_such_test =
            |id: &str| error_reply(Api::Json, 404, Some(&format!("no retry test {id:?}")));
        match control {
            Control::Create => match self.create_json(body) {
                Ok(test) => Reply::json(200, &test),
                Err(message) => error_reply(Api::Json, 400, Some(&message)),
            },
            Control::List => Reply::json(200, &self.list_json()),
            Control::Get(id) => match self.get_json(id) {
                Some(test) => Reply::json(200, &test),
                None => no_such_test(id),
            },
            Control::Delete(id) => match self.delete(id) {
                true => Reply::json(200, &json!({})),
                false => no_such_test(id),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_routes_are_the_testbenchs() {
        let parse = |method, path| Control::parse(&method, path);
        assert_eq!(
            parse(Method::POST, "/retry_test"),
            Some(Ok(Control::Create))
        );
        assert_eq!(parse(Method::GET, "/retry_tests"), Some(Ok(Control::List)));
        assert_eq!(
            parse(Method::DELETE, "/retry_test/7"),
            Some(Ok(Control::Delete("7".into())))
        );
        assert!(matches!(
            parse(Method::POST, "/retry_tests"),
            Some(Err(Route::Invalid { status: 404, .. }))
        ));
        assert_eq!(parse(Method::GET, "/retry"), None);
    }

    #[test]
    fn the_testbench_vocabulary_round_trips() {
        for text in [
            "return-503",
            "return-429",
            "return-reset-connection",
            "return-broken-stream",
            "return-503-after-256K",
            "return-broken-stream-after-10B",
            "stall-for-10s-after-64K",
            "return-broken-stream-final-chunk-after-1B",
        ] {
            let i: Instruction = text.parse().unwrap();
            assert_eq!(i.to_string(), text);
        }
        assert_eq!(
            "return-408-after-2K".parse::<Instruction>(),
            Ok(Instruction::ReturnAfter {
                status: 408,
                after_bytes: 2048
            })
        );
        for bad in [
            "return-200",
            "return-5xx",
            "stall-for-x-after-1K",
            "return-broken-stream-final-chunk-after-1K",
            "explode",
        ] {
            assert!(bad.parse::<Instruction>().is_err(), "{bad}");
        }
    }

    #[test]
    fn tests_are_consumed_per_operation_then_the_script() {
        let mut tests = RetryTests::new(10);
        let created = tests
            .create_json(
                br#"{"instructions": {"storage.objects.insert": ["return-503", "return-reset-connection"]}}"#,
            )
            .unwrap();
        let id = created["id"].as_str().unwrap().to_string();
        assert_eq!(created["completed"], false);
        let insert = Operation::ObjectsInsert;
        tests.script(insert, [Instruction::Return(500)]);
        assert_eq!(
            tests
                .next(Some(&id), Operation::ObjectsGet, |_| false)
                .unwrap(),
            None
        );
        assert_eq!(
            tests.next(Some(&id), insert, |_| false).unwrap(),
            Some(Instruction::Return(503))
        );
        assert_eq!(
            tests.next(None, insert, |_| false).unwrap(),
            Some(Instruction::Return(500))
        );
        assert_eq!(
            tests.next(Some(&id), insert, |_| false).unwrap(),
            Some(Instruction::ResetConnection)
        );
        assert_eq!(tests.next(Some(&id), insert, |_| false).unwrap(), None);
        assert_eq!(tests.get_json(&id).unwrap()["completed"], true);
        assert!(tests.next(Some("rt-99999999"), insert, |_| false).is_err());
        assert!(tests.delete(&id));
        assert!(tests.get_json(&id).is_none());
    }

    #[test]
    fn an_instruction_left_for_the_api_stays_queued_until_taken() {
        let mut tests = RetryTests::new(10);
        let created = tests
            .create_json(br#"{"instructions": {"storage.objects.insert": ["return-503-after-256K", "return-408"]}}"#)
            .unwrap();
        let id = created["id"].as_str().unwrap().to_string();
        let insert = Operation::ObjectsInsert;
        let counted = |i: &Instruction| i.counts_session_bytes();
        assert_eq!(tests.next(Some(&id), insert, counted).unwrap(), None);
        let first = tests.peek(Some(&id), insert);
        assert_eq!(first, Some("return-503-after-256K".parse().unwrap()));
        assert_eq!(tests.pop(Some(&id), insert), first);
        assert_eq!(
            tests.next(Some(&id), insert, counted).unwrap(),
            Some(Instruction::Return(408))
        );
        assert_eq!(tests.get_json(&id).unwrap()["completed"], true);
    }

    #[test]
    fn the_oldest_test_is_forgotten_past_the_bound() {
        let mut tests = RetryTests::new(2);
        let ids: Vec<_> = (0..3)
            .map(|_| tests.create(BTreeMap::new(), "HTTP".into()))
            .collect();
        assert!(tests.get_json(&ids[0]).is_none());
        assert!(tests.get_json(&ids[2]).is_some());
    }
}
