//! The Grafana dashboard for the spool's series, built from the same metric names
//! ([`super::names`]) and alert rules ([`crate::alerts::RULES`]: its thresholds and
//! forecast) as the rules file:
//!
//! - `spool/dashboards/spool.json` is [`dashboard_json`] (a test keeps them
//!   identical; `cargo run -p spool --example print_dashboard` regenerates it);
//! - `spool/alerts/dashboard.rules.yml` is [`recording_rules_yaml`]: every panel's
//!   query as a recording rule, with the dashboard's variables replaced
//!   ([`concrete`]), so that `promtool check rules` parses each one. It is a check,
//!   not meant to be loaded into Prometheus.
//!
//! The dashboard has two variables: `datasource` (any Prometheus data source) and
//! `instance` (one or more scraped spools, from `label_values(spool_files, instance)`).

use std::fmt::Write as _;

use super::names::*;
use crate::alerts::{Condition, RULES, prometheus_duration, quoted};

/// How a panel draws its queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelKind {
    /// Lines over time.
    TimeSeries,
    /// One bar per series, coloured while it exists (for `ALERTS`).
    StateTimeline,
}

/// One query of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// PromQL, with the dashboard's variables (`$instance`, `$__rate_interval`).
    pub expr: String,
    /// Grafana's legend format (`{{instance}} files`).
    pub legend: String,
}

/// One panel of the dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Title.
    pub title: &'static str,
    /// What it shows, as Grafana's panel description.
    pub description: &'static str,
    /// Grafana's unit id (`short`, `bytes`, `s`, `percentunit`, `ops`).
    pub unit: &'static str,
    /// How it draws.
    pub kind: PanelKind,
    /// Its queries.
    pub queries: Vec<Query>,
    /// A threshold drawn as a line, from the alert rule that watches the same value.
    pub threshold: Option<f64>,
}

impl Panel {
    /// A time-series panel without a threshold.
    fn lines(
        title: &'static str,
        description: &'static str,
        unit: &'static str,
        queries: Vec<Query>,
    ) -> Panel {
        Panel {
            title,
            description,
            unit,
            kind: PanelKind::TimeSeries,
            queries,
            threshold: None,
        }
    }

    fn with_threshold(self, threshold: Option<f64>) -> Panel {
        Panel { threshold, ..self }
    }
}

/// `name` restricted to the dashboard's instances.
fn sel(name: &str) -> String {
    format!("{name}{{instance=~\"$instance\"}}")
}

/// The per-second rate of counter `name`, summed by `by`.
fn rate_by(name: &str, by: &str) -> String {
    format!("sum by ({by}) (rate({}[$__rate_interval]))", sel(name))
}

fn q(expr: impl Into<String>, legend: &str) -> Query {
    Query {
        expr: expr.into(),
        legend: legend.into(),
    }
}

/// The dashboard's panels, in order.
pub fn panels() -> Vec<Panel> {
    let stale_after = RULES.iter().find_map(|r| match r.condition {
        Condition::OldestAgeAbove(s) => Some(s),
        _ => None,
    });
    let nearly_full = RULES.iter().find_map(|r| match r.condition {
        Condition::FullerThan(ratio) => Some(ratio),
        _ => None,
    });
    let (lookback, horizon) = RULES
        .iter()
        .find_map(|r| match r.condition {
            Condition::FullWithin {
                lookback, horizon, ..
            } => Some((lookback, horizon)),
            _ => None,
        })
        .expect("the shipped rules forecast fullness");
    let latency = |name: &str, legend: &str| {
        q(
            format!(
                "histogram_quantile(0.99, sum by (instance, le) (rate({}[$__rate_interval])))",
                sel(&format!("{name}_bucket"))
            ),
            &format!("{{{{instance}}}} {legend}"),
        )
    };
    vec![
        Panel::lines(
            "Entries",
            "Entries stored (the backlog), the max_files bound, entries drainer workers are sending, and entries puts are writing.",
            "short",
            vec![
                q(sel(FILES), "{{instance}} stored"),
                q(sel(MAX_FILES), "{{instance}} max_files"),
                q(sel(CLAIMED_FILES), "{{instance}} being drained"),
                q(sel(RESERVED_FILES), "{{instance}} being written"),
            ],
        ),
        Panel::lines(
            "Bytes",
            "Bytes of entry files stored, the max_bytes bound, and bytes reserved by puts in progress.",
            "bytes",
            vec![
                q(sel(BYTES), "{{instance}} stored"),
                q(sel(MAX_BYTES), "{{instance}} max_bytes"),
                q(sel(RESERVED_BYTES), "{{instance}} being written"),
            ],
        ),
        Panel::lines(
            "Fullness",
            "Bytes and entries as a fraction of their bounds, and the bytes forecast the SpoolFullWithinAnHour alert uses; the line is SpoolNearlyFull's threshold.",
            "percentunit",
            vec![
                q(
                    format!("{} / {}", sel(BYTES), sel(MAX_BYTES)),
                    "{{instance}} bytes",
                ),
                q(
                    format!("{} / {}", sel(FILES), sel(MAX_FILES)),
                    "{{instance}} entries",
                ),
                q(
                    format!(
                        "predict_linear({}[{}], {}) / {}",
                        sel(BYTES),
                        prometheus_duration(lookback),
                        horizon.as_secs_f64(),
                        sel(MAX_BYTES)
                    ),
                    &format!(
                        "{{{{instance}}}} bytes in {} (forecast)",
                        prometheus_duration(horizon)
                    ),
                ),
            ],
        )
        .with_threshold(nearly_full),
        Panel::lines(
            "Oldest entry age",
            "How long the oldest entry has waited for the store; the line is SpoolOldestEntryStale's threshold.",
            "s",
            vec![q(sel(OLDEST_AGE_SECONDS), "{{instance}}")],
        )
        .with_threshold(stale_after),
        Panel::lines(
            "Upload outcomes",
            "Upload calls per second: stored directly, spooled, rejected (spool full: callers got backpressure) or failed.",
            "ops",
            vec![q(
                rate_by(UPLOADS_TOTAL, "instance, outcome"),
                "{{instance}} {{outcome}}",
            )],
        ),
        Panel::lines(
            "Drain rate",
            "Entries drained per second (uploaded, or already present after an earlier try landed), and failed drain attempts that will be retried.",
            "ops",
            vec![
                q(
                    rate_by(DRAINED_TOTAL, "instance, outcome"),
                    "{{instance}} {{outcome}}",
                ),
                q(
                    rate_by(DRAIN_RETRIES_TOTAL, "instance"),
                    "{{instance}} retries",
                ),
            ],
        ),
        Panel::lines(
            "Store errors by kind",
            "Failed object-store writes per second, by path (direct, drain) and kind (status, timeout, transport, ...).",
            "ops",
            vec![q(
                rate_by(STORE_ERRORS_TOTAL, "instance, path, kind"),
                "{{instance}} {{path}} {{kind}}",
            )],
        ),
        Panel::lines(
            "Dead letters and quarantine",
            "Files set aside and still on disk: dead-letter/ (the store refused them for good) and quarantine/ (failed verification).",
            "short",
            vec![
                q(sel(DEAD_LETTER_FILES), "{{instance}} dead-letter"),
                q(sel(QUARANTINED_FILES), "{{instance}} quarantine"),
            ],
        ),
        Panel::lines(
            "Broken and recoveries",
            "1 while the spool refuses writes after a failed directory sync, and the times it reopened itself.",
            "short",
            vec![
                q(sel(BROKEN), "{{instance}} broken"),
                q(
                    format!("increase({}[$__rate_interval])", sel(RECOVERIES_TOTAL)),
                    "{{instance}} recoveries",
                ),
            ],
        ),
        Panel::lines(
            "Latency (p99)",
            "99th percentile of direct store writes, durable spool puts and drain store writes.",
            "s",
            vec![
                latency(UPLOAD_DIRECT_SECONDS, "direct write"),
                latency(PUT_SECONDS, "spool put"),
                latency(DRAIN_WRITE_SECONDS, "drain write"),
            ],
        ),
        Panel {
            title: "Alerts",
            description: "The spool's alerts, pending and firing (spool/alerts/spool.rules.yml; each links to docs/runbook.md).",
            unit: "short",
            kind: PanelKind::StateTimeline,
            queries: vec![q(
                "ALERTS{alertname=~\"Spool.*\"}",
                "{{alertname}} {{alertstate}} {{instance}}",
            )],
            threshold: None,
        },
    ]
}

/// `expr` with the dashboard's variables replaced by what Prometheus accepts: all
/// instances, a 5-minute rate window.
pub fn concrete(expr: &str) -> String {
    expr.replace("$instance", ".+")
        .replace("$__rate_interval", "5m")
}

/// The recording-rules file that holds every panel's query (see the module
/// documentation): `spool/alerts/dashboard.rules.yml`.
pub fn recording_rules_yaml() -> String {
    let mut out = String::from(
        "# Generated from spool/src/metrics/dashboard.rs (a test checks they match): every\n\
         # query of spool/dashboards/spool.json as a recording rule, so that `promtool check\n\
         # rules` parses each one ($instance as .+, $__rate_interval as 5m). A check only:\n\
         # not meant to be loaded. Regenerate with\n\
         # cargo run -p spool --example print_dashboard -- --recording-rules > spool/alerts/dashboard.rules.yml\n\
         groups:\n  - name: spool-dashboard-queries\n    rules:\n",
    );
    for (i, panel) in panels().iter().enumerate() {
        for (j, query) in panel.queries.iter().enumerate() {
            let _ = writeln!(
                out,
                "      # {}: {}\n      - record: spool_dashboard:panel_{}_{}\n        expr: {}",
                panel.title,
                query.legend,
                i + 1,
                ref_id(j).to_ascii_lowercase(),
                quoted(&concrete(&query.expr))
            );
        }
    }
    out
}

/// Grafana's query id: A, B, C...
fn ref_id(j: usize) -> String {
    char::from(b'A' + u8::try_from(j).expect("fewer than 26 queries per panel")).to_string()
}

/// The dashboard, as Grafana's JSON model (`spool/dashboards/spool.json`).
pub fn dashboard_json() -> String {
    let datasource = || {
        Json::obj([
            ("type", Json::str("prometheus")),
            ("uid", Json::str("${datasource}")),
        ])
    };
    let panels: Vec<Json> = panels()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let full_width = p.kind == PanelKind::StateTimeline;
            let (w, x) = if full_width {
                (24u8, 0u8)
            } else {
                (12, if i % 2 == 0 { 0 } else { 12 })
            };
            let targets = p
                .queries
                .iter()
                .enumerate()
                .map(|(j, query)| {
                    Json::obj([
                        ("datasource", datasource()),
                        ("expr", Json::str(&query.expr)),
                        ("legendFormat", Json::str(&query.legend)),
                        ("refId", Json::str(&ref_id(j))),
                    ])
                })
                .collect();
            let mut steps = vec![Json::obj([
                ("color", Json::str("green")),
                ("value", Json::Null),
            ])];
            if let Some(t) = p.threshold {
                steps.push(Json::obj([
                    ("color", Json::str("red")),
                    ("value", Json::Num(t)),
                ]));
            }
            let custom = match p.kind {
                PanelKind::TimeSeries => Json::obj([
                    ("fillOpacity", Json::Num(10.0)),
                    ("showPoints", Json::str("never")),
                    (
                        "thresholdsStyle",
                        Json::obj([(
                            "mode",
                            Json::str(if p.threshold.is_some() { "line" } else { "off" }),
                        )]),
                    ),
                ]),
                PanelKind::StateTimeline => Json::obj([("fillOpacity", Json::Num(70.0))]),
            };
            Json::obj([
                ("datasource", datasource()),
                ("description", Json::str(p.description)),
                (
                    "fieldConfig",
                    Json::obj([
                        (
                            "defaults",
                            Json::obj([
                                ("custom", custom),
                                (
                                    "thresholds",
                                    Json::obj([
                                        ("mode", Json::str("absolute")),
                                        ("steps", Json::Arr(steps)),
                                    ]),
                                ),
                                ("unit", Json::str(p.unit)),
                            ]),
                        ),
                        ("overrides", Json::Arr(Vec::new())),
                    ]),
                ),
                (
                    "gridPos",
                    Json::obj([
                        ("h", Json::Num(8.0)),
                        ("w", Json::Num(f64::from(w))),
                        ("x", Json::Num(f64::from(x))),
                        ("y", Json::Num(8.0 * (i / 2) as f64)),
                    ]),
                ),
                ("id", Json::Num((i + 1) as f64)),
                (
                    "options",
                    Json::obj([
                        (
                            "legend",
                            Json::obj([
                                ("displayMode", Json::str("list")),
                                ("placement", Json::str("bottom")),
                                ("showLegend", Json::Bool(true)),
                            ]),
                        ),
                        ("tooltip", Json::obj([("mode", Json::str("multi"))])),
                    ]),
                ),
                ("targets", Json::Arr(targets)),
                ("title", Json::str(p.title)),
                (
                    "type",
                    Json::str(match p.kind {
                        PanelKind::TimeSeries => "timeseries",
                        PanelKind::StateTimeline => "state-timeline",
                    }),
                ),
            ])
        })
        .collect();
    let instances = format!("label_values({FILES}, instance)");
    let templating = Json::obj([(
        "list",
        Json::Arr(vec![
            Json::obj([
                ("current", Json::obj([])),
                ("hide", Json::Num(0.0)),
                ("includeAll", Json::Bool(false)),
                ("label", Json::str("Data source")),
                ("multi", Json::Bool(false)),
                ("name", Json::str("datasource")),
                ("options", Json::Arr(Vec::new())),
                ("query", Json::str("prometheus")),
                ("refresh", Json::Num(1.0)),
                ("regex", Json::str("")),
                ("type", Json::str("datasource")),
            ]),
            Json::obj([
                ("allValue", Json::str(".+")),
                ("current", Json::obj([])),
                ("datasource", datasource()),
                ("definition", Json::str(&instances)),
                ("hide", Json::Num(0.0)),
                ("includeAll", Json::Bool(true)),
                ("label", Json::str("Instance")),
                ("multi", Json::Bool(true)),
                ("name", Json::str("instance")),
                ("options", Json::Arr(Vec::new())),
                (
                    "query",
                    Json::obj([
                        ("query", Json::str(&instances)),
                        (
                            "refId",
                            Json::str("PrometheusVariableQueryEditor-VariableQuery"),
                        ),
                    ]),
                ),
                ("refresh", Json::Num(2.0)),
                ("regex", Json::str("")),
                ("sort", Json::Num(1.0)),
                ("type", Json::str("query")),
            ]),
        ]),
    )]);
    let dashboard = Json::obj([
        (
            "description",
            Json::str(
                "Generated from spool/src/metrics/dashboard.rs; edit there. Backlog, fullness, outcomes, drain, store errors and alerts of spools (spool_* series).",
            ),
        ),
        ("editable", Json::Bool(true)),
        ("graphTooltip", Json::Num(1.0)),
        ("panels", Json::Arr(panels)),
        ("refresh", Json::str("30s")),
        ("schemaVersion", Json::Num(39.0)),
        ("tags", Json::Arr(vec![Json::str("spool")])),
        ("templating", templating),
        (
            "time",
            Json::obj([("from", Json::str("now-6h")), ("to", Json::str("now"))]),
        ),
        ("timezone", Json::str("browser")),
        ("title", Json::str("Spool")),
        ("uid", Json::str("spool")),
        ("version", Json::Num(1.0)),
    ]);
    let mut out = String::new();
    dashboard.write(&mut out, 0);
    out.push('\n');
    out
}

/// Just enough JSON to write the dashboard: objects keep their keys in order.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    fn str(s: &str) -> Json {
        Json::Str(s.to_string())
    }

    fn obj<const N: usize>(fields: [(&'static str, Json); N]) -> Json {
        Json::Obj(fields.into())
    }

    /// Pretty-printed with two-space indents, starting at `depth`.
    fn write(&self, out: &mut String, depth: usize) {
        let pad = |out: &mut String, depth: usize| out.push_str(&"  ".repeat(depth));
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => {
                let _ = write!(out, "{}", *n as i64);
            }
            Json::Num(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => out.push_str(&quoted(s)),
            Json::Arr(items) if items.is_empty() => out.push_str("[]"),
            Json::Obj(fields) if fields.is_empty() => out.push_str("{}"),
            Json::Arr(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    pad(out, depth + 1);
                    item.write(out, depth + 1);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                pad(out, depth);
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push_str("{\n");
                for (i, (key, value)) in fields.iter().enumerate() {
                    pad(out, depth + 1);
                    out.push_str(&quoted(key));
                    out.push_str(": ");
                    value.write(out, depth + 1);
                    out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
                }
                pad(out, depth);
                out.push('}');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_dashboard_matches_the_generator() {
        assert_eq!(
            include_str!("../../dashboards/spool.json"),
            dashboard_json(),
            "regenerate: cargo run -p spool --example print_dashboard > spool/dashboards/spool.json"
        );
    }

    #[test]
    fn the_committed_recording_rules_hold_every_panel_query() {
        assert_eq!(
            include_str!("../../alerts/dashboard.rules.yml"),
            recording_rules_yaml(),
            "regenerate: cargo run -p spool --example print_dashboard -- --recording-rules > spool/alerts/dashboard.rules.yml"
        );
        let queries: usize = panels().iter().map(|p| p.queries.len()).sum();
        assert_eq!(
            recording_rules_yaml().matches("- record: ").count(),
            queries
        );
    }

    #[test]
    fn the_dashboard_is_json_with_the_datasource_and_instance_variables() {
        let dashboard: serde_json::Value = serde_json::from_str(&dashboard_json()).unwrap();
        let variables: Vec<&str> = dashboard["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(variables, ["datasource", "instance"]);
        let panels = dashboard["panels"].as_array().unwrap();
        assert_eq!(panels.len(), super::panels().len());
        for panel in panels {
            assert_eq!(panel["datasource"]["uid"], "${datasource}");
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                assert!(
                    expr.contains("instance=~\"$instance\"") || expr.starts_with("ALERTS"),
                    "{expr} ignores the instance variable"
                );
            }
        }
    }

    #[test]
    fn panels_cover_what_an_operator_watches() {
        let all: String = panels()
            .iter()
            .flat_map(|p| p.queries.iter().map(|q| q.expr.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        for name in [
            FILES,
            BYTES,
            MAX_BYTES,
            OLDEST_AGE_SECONDS,
            UPLOADS_TOTAL,
            DRAINED_TOTAL,
            STORE_ERRORS_TOTAL,
            DEAD_LETTER_FILES,
            QUARANTINED_FILES,
            RECOVERIES_TOTAL,
            "ALERTS{alertname=~\"Spool.*\"}",
        ] {
            assert!(all.contains(name), "no panel shows {name}");
        }
    }

    #[test]
    fn thresholds_come_from_the_alert_rules() {
        let p = panels();
        let age = p.iter().find(|p| p.title == "Oldest entry age").unwrap();
        assert_eq!(age.threshold, Some(900.0));
        let full = p.iter().find(|p| p.title == "Fullness").unwrap();
        assert_eq!(full.threshold, Some(0.8));
        assert!(
            full.queries[2].expr.contains("[30m], 3600)"),
            "{:?}",
            full.queries[2]
        );
    }

    #[test]
    fn concrete_queries_have_no_variables_left() {
        for panel in panels() {
            for query in panel.queries {
                assert!(!concrete(&query.expr).contains('$'), "{}", query.expr);
            }
        }
    }
}
