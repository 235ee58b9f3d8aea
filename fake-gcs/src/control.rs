//! The fake's own control API, under `/_fake/`, for whoever drives a running fake
//! over HTTP (a user with curl, another language's CI job): fault windows that
//! start now, a reset, and the statistics. Cloud Storage bucket names cannot start
//! with `_`, so these paths never shadow the XML API.
//!
//! | request | answer |
//! |---|---|
//! | `POST /_fake/faults` | adds a fault plan (TOML, or JSON with the same keys) whose offsets count from now; the plan in force |
//! | `GET /_fake/faults` | the plan in force, offsets from the fake's start, and `elapsed_ms` |
//! | `DELETE /_fake/faults` | removes every window, refusal and capacity |
//! | `POST /_fake/reset` | clears objects, faults, statistics, sessions and retry tests |
//! | `GET /_fake/stats` | [`FakeStats`](crate::FakeStats) as JSON, with objects and bytes per bucket |
//!
//! These requests are never faulted and not counted in the statistics.

use http::{HeaderMap, Method};
use serde_json::{Value, json};

use crate::fake::FakeGcs;
use crate::faults::{FaultPlan, PlanError};
use crate::wire::{Api, Reply, Route, error_reply, header};

/// The path prefix of the control API.
const PREFIX: &str = "/_fake/";

/// A request to the control API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FakeControl {
    AddFaults,
    GetFaults,
    ClearFaults,
    Reset,
    Stats,
}

impl FakeControl {
    /// The control request `method path` makes: `None` for a path outside
    /// `/_fake/`, `Some(Err(route))` (a 404) for one the API does not serve.
    pub(crate) fn parse(method: &Method, path: &str) -> Option<Result<FakeControl, Route>> {
        let rest = path.strip_prefix(PREFIX)?;
        Some(match (method, rest.trim_end_matches('/')) {
            (&Method::POST, "faults") => Ok(FakeControl::AddFaults),
            (&Method::GET, "faults") => Ok(FakeControl::GetFaults),
            (&Method::DELETE, "faults") => Ok(FakeControl::ClearFaults),
            (&Method::POST, "reset") => Ok(FakeControl::Reset),
            (&Method::GET, "stats") => Ok(FakeControl::Stats),
            _ => Err(Route::not_found(Api::Json, method, path)),
        })
    }
}

impl FakeGcs {
    /// Serves a control request with its `body`; each step takes the fake's lock
    /// itself.
    pub(crate) fn control(&self, control: FakeControl, headers: &HeaderMap, body: &[u8]) -> Reply {
        match control {
            FakeControl::AddFaults => match parse_plan(headers, body) {
                Ok(plan) => match self.add_faults(plan) {
                    Ok(_) => self.faults_reply(),
                    Err(e) => plan_error(&e),
                },
                Err(e) => plan_error(&e),
            },
            FakeControl::GetFaults => self.faults_reply(),
            FakeControl::ClearFaults => {
                self.clear_faults();
                self.faults_reply()
            }
            FakeControl::Reset => {
                self.reset();
                Reply::json(200, &json!({ "reset": true }))
            }
            FakeControl::Stats => Reply::json(200, &self.stats_json()),
        }
    }

    /// `{"elapsed_ms": ..., "plan": {...}}`: the plan in force.
    fn faults_reply(&self) -> Reply {
        let plan = serde_json::to_value(self.faults()).unwrap_or(Value::Null);
        let elapsed_ms = self.elapsed().as_millis() as u64;
        Reply::json(200, &json!({ "elapsed_ms": elapsed_ms, "plan": plan }))
    }

    /// The statistics, with the fake's elapsed time and each bucket's objects and
    /// bytes.
    fn stats_json(&self) -> Value {
        let mut stats = serde_json::to_value(self.stats()).unwrap_or(Value::Null);
        let buckets: serde_json::Map<String, Value> = self
            .state()
            .buckets
            .iter()
            .map(|(name, b)| {
                let bytes: u64 = b.objects.values().map(|o| o.size()).sum();
                let summary = json!({ "objects": b.objects.len(), "bytes": bytes });
                (name.clone(), summary)
            })
            .collect();
        stats["buckets"] = Value::Object(buckets);
        stats["elapsed_ms"] = json!(self.elapsed().as_millis() as u64);
        stats
    }
}

/// The plan in `body`: JSON when the content type says so or the body starts with
/// `{`, TOML otherwise.
fn parse_plan(headers: &HeaderMap, body: &[u8]) -> Result<FaultPlan, PlanError> {
    let json_type = header(headers, "content-type").is_some_and(|t| t.contains("json"));
    let starts_json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if json_type || starts_json {
        return FaultPlan::from_json(body);
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| PlanError::new("(toml)", "the body is not UTF-8 text"))?;
    FaultPlan::from_toml(text)
}

fn plan_error(e: &PlanError) -> Reply {
    error_reply(Api::Json, 400, Some(&format!("invalid fault plan: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_routes_are_under_the_fake_prefix() {
        let parse = |method, path| FakeControl::parse(&method, path);
        assert_eq!(
            parse(Method::POST, "/_fake/faults"),
            Some(Ok(FakeControl::AddFaults))
        );
        assert_eq!(
            parse(Method::GET, "/_fake/stats/"),
            Some(Ok(FakeControl::Stats))
        );
        assert!(matches!(
            parse(Method::GET, "/_fake/reset"),
            Some(Err(Route::Invalid { status: 404, .. }))
        ));
        assert_eq!(parse(Method::GET, "/fake/stats"), None);
    }

    #[test]
    fn a_plan_is_read_as_json_or_toml() {
        let mut json = HeaderMap::new();
        json.insert("content-type", "application/json".parse().unwrap());
        let from_json = parse_plan(&json, br#"{"fault":[{"until":"30s"}]}"#).unwrap();
        let from_toml = parse_plan(&HeaderMap::new(), b"[[fault]]\nuntil = \"30s\"\n").unwrap();
        assert_eq!(from_json, from_toml);
        let sniffed = parse_plan(&HeaderMap::new(), b" {\"fault\":[{\"until\":\"30s\"}]}").unwrap();
        assert_eq!(sniffed, from_toml);
        let e = parse_plan(&HeaderMap::new(), b"[[fault]]\nshare = 2\n").unwrap_err();
        assert_eq!(e.field, "fault[0].share");
    }
}
