//! Parameter sweeps: run one scenario with one or more keys set to each of several
//! values (several `--set` make a grid), on all cores, and summarize the variants in
//! `sweep.md`, `sweep.csv` and a chart of the figure of interest against the swept
//! value.
//!
//! A key is a dotted path into the scenario file (`spool.max_bytes`,
//! `workload.rate`, `drainer.workers`, `drainer.jitter`); each value is parsed as a
//! TOML value (`64`, `0.5`, `true`), or taken as a string when it is not one
//! (`full`, `"5 MiB"`). Each variant is a complete scenario run with its own report.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, bail};

use crate::report::Report;
use crate::report::pipeline;
use crate::scenario::{self, Scenario};
use crate::world::Options;

/// One `--set KEY=V1,V2,...`.
#[derive(Debug, Clone, PartialEq)]
pub struct SetArg {
    /// Dotted key.
    pub key: String,
    /// Values, as TOML.
    pub values: Vec<toml::Value>,
}

/// Parses `KEY=V1,V2,...`.
pub fn parse_set(arg: &str) -> anyhow::Result<SetArg> {
    let Some((key, values)) = arg.split_once('=') else {
        bail!("--set {arg:?}: expected KEY=VALUE[,VALUE...], e.g. drainer.jitter=none,full");
    };
    let key = key.trim();
    if key.is_empty() || key.split('.').any(str::is_empty) {
        bail!("--set {arg:?}: {key:?} is not a dotted key such as spool.max_bytes");
    }
    let values: Vec<toml::Value> = values.split(',').map(|v| parse_value(v.trim())).collect();
    if values.iter().any(|v| v.as_str() == Some("")) {
        bail!("--set {arg:?}: empty value");
    }
    Ok(SetArg {
        key: key.to_string(),
        values,
    })
}

/// A TOML value if `text` is one, else the text as a string.
fn parse_value(text: &str) -> toml::Value {
    format!("v = {text}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.trim_matches('"').to_string()))
}

/// How a value is shown in names and tables: `full`, `64`, `5 MiB`.
pub fn value_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One variant: the values it sets, and its scenario.
#[derive(Debug, Clone)]
pub struct Variant {
    /// (key, value) pairs, in `--set` order.
    pub settings: Vec<(String, toml::Value)>,
    /// The scenario with them applied.
    pub scenario: Scenario,
}

impl Variant {
    /// `drainer.jitter=full,workload.rate=50`.
    pub fn label(&self) -> String {
        self.settings
            .iter()
            .map(|(k, v)| format!("{k}={}", value_text(v)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A folder name for its report.
    pub fn dir_name(&self) -> String {
        self.label()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.=".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// Every combination of the `sets`, applied to the scenario file `text`.
pub fn variants(file: &str, text: &str, sets: &[SetArg]) -> anyhow::Result<Vec<Variant>> {
    if sets.is_empty() {
        bail!("give at least one --set KEY=V1,V2,...");
    }
    let base: toml::Table = text
        .parse()
        .with_context(|| format!("cannot parse {file}"))?;
    let mut combos: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
    for set in sets {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                set.values.iter().map(move |v| {
                    let mut next = combo.clone();
                    next.push((set.key.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .map(|settings| {
            let mut table = base.clone();
            for (key, value) in &settings {
                set_key(&mut table, key, value.clone())?;
            }
            let text = toml::to_string(&table)?;
            let label = settings
                .iter()
                .map(|(k, v)| format!("{k}={}", value_text(v)))
                .collect::<Vec<_>>()
                .join(",");
            let scenario = scenario::parse(&format!("{file} with {label}"), &text)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(Variant { settings, scenario })
        })
        .collect()
}

fn set_key(table: &mut toml::Table, key: &str, value: toml::Value) -> anyhow::Result<()> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().expect("keys are non-empty");
    let mut current = table;
    for part in parts {
        let entry = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = entry
            .as_table_mut()
            .with_context(|| format!("--set {key}: {part} is not a table"))?;
    }
    current.insert(last.to_string(), value);
    Ok(())
}

/// A variant's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The variant.
    pub label: String,
    /// Its report's folder, inside the sweep's.
    pub dir: String,
    /// Its settings.
    pub settings: Vec<(String, toml::Value)>,
    /// Its report.
    pub report: Report,
    /// Wall seconds it took.
    pub wall_seconds: f64,
}

/// Runs every variant on up to `jobs` threads (each simulation is single-threaded
/// and deterministic; threads only run different variants side by side). Reports go
/// to `dir/<variant>/`; the summary to `dir/sweep.*`.
pub fn run(
    dir: &Path,
    variants: Vec<Variant>,
    jobs: usize,
    metric: &str,
) -> anyhow::Result<Vec<Outcome>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let queue = Mutex::new(variants.into_iter().enumerate().collect::<Vec<_>>());
    let results: Mutex<Vec<(usize, anyhow::Result<Outcome>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let Some((i, variant)) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop()
                    else {
                        return;
                    };
                    let label = variant.label();
                    let dir_name = variant.dir_name();
                    let out = dir.join(&dir_name);
                    eprintln!("sweep: running {label}");
                    let settings = variant.settings.clone();
                    let result = pipeline::run(variant.scenario, &out, Options::default(), true)
                        .map(|f| Outcome {
                            label: label.clone(),
                            dir: dir_name,
                            settings,
                            report: f.report,
                            wall_seconds: f.timing.wall_seconds,
                        })
                        .with_context(|| format!("variant {label}"));
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let outcomes = results
        .into_iter()
        .map(|(_, r)| r)
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_summary(dir, &outcomes, metric)?;
    Ok(outcomes)
}

/// The figures a sweep can chart, by name.
pub const METRICS: &[&str] = &[
    "drain_seconds",
    "peak_files",
    "peak_bytes",
    "peak_oldest_age_seconds",
    "rejected",
    "store_requests",
    "store_shed",
    "duplicates",
];

/// The value of `metric` in `report` (`None` when it has none, such as a drain that
/// never finished).
pub fn metric_value(report: &Report, metric: &str) -> Option<f64> {
    Some(match metric {
        "drain_seconds" => report.drain_seconds?,
        "peak_files" => report.peak_files as f64,
        "peak_bytes" => report.peak_bytes as f64,
        "peak_oldest_age_seconds" => report.peak_oldest_age_seconds,
        "rejected" => report.tally.told.rejected as f64,
        "store_requests" => report.store.requests as f64,
        "store_shed" => report.store.shed as f64,
        "duplicates" => report.tally.duplicates_avoided as f64,
        _ => return None,
    })
}

fn write_summary(dir: &Path, outcomes: &[Outcome], metric: &str) -> anyhow::Result<()> {
    let header = "variant,passed,writes,stored,spooled,rejected,lost,peak_files,peak_bytes,peak_oldest_age_seconds,drain_seconds,store_requests,store_shed,duplicates";
    let mut csv = format!("{header}\n");
    let mut md = String::from(
        "# Sweep\n\n| variant | passed | writes | refused | lost | peak files | peak bytes | oldest age (s) | drain (s) | store requests | shed |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for o in outcomes {
        let r = &o.report;
        let drain = r
            .drain_seconds
            .map(|d| format!("{d}"))
            .unwrap_or_else(|| "never".into());
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            o.label,
            r.passed,
            r.tally.told.writes,
            r.tally.told.stored,
            r.tally.told.spooled,
            r.tally.told.rejected,
            r.tally.lost,
            r.peak_files,
            r.peak_bytes,
            r.peak_oldest_age_seconds,
            drain,
            r.store.requests,
            r.store.shed,
            r.tally.duplicates_avoided
        );
        let _ = writeln!(
            md,
            "| [{}]({}/report.md) | {} | {} | {} | {} | {} | {} | {:.0} | {drain} | {} | {} |",
            o.label,
            o.dir,
            if r.passed { "yes" } else { "**no**" },
            r.tally.told.writes,
            r.tally.told.rejected,
            r.tally.lost,
            r.peak_files,
            spool::format::bytes(r.peak_bytes),
            r.peak_oldest_age_seconds,
            r.store.requests,
            r.store.shed
        );
    }
    std::fs::write(dir.join("sweep.csv"), csv).context("cannot write sweep.csv")?;
    if let Some((file, title)) = chart(dir, outcomes, metric)? {
        let _ = writeln!(md, "\n![{title}]({file})");
    }
    std::fs::write(dir.join("sweep.md"), md).context("cannot write sweep.md")?;
    Ok(())
}

/// `metric` against the first swept key, one line per value of the other keys.
fn chart(
    dir: &Path,
    outcomes: &[Outcome],
    metric: &str,
) -> anyhow::Result<Option<(String, String)>> {
    let Some(first) = outcomes.first() else {
        return Ok(None);
    };
    let key = first.settings[0].0.clone();
    // x: the first key's value when numeric, else its position among the values.
    let mut categories: Vec<String> = Vec::new();
    for o in outcomes {
        let text = value_text(&o.settings[0].1);
        if !categories.contains(&text) {
            categories.push(text);
        }
    }
    let numeric = outcomes
        .iter()
        .all(|o| o.settings[0].1.as_integer().is_some() || o.settings[0].1.as_float().is_some());
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for o in outcomes {
        let rest = o.settings[1..]
            .iter()
            .map(|(k, v)| format!("{k}={}", value_text(v)))
            .collect::<Vec<_>>()
            .join(",");
        let name = if rest.is_empty() {
            metric.to_string()
        } else {
            rest
        };
        let v = &o.settings[0].1;
        let x = if numeric {
            v.as_integer()
                .map(|i| i as f64)
                .or(v.as_float())
                .unwrap_or(0.0)
        } else {
            categories
                .iter()
                .position(|c| *c == value_text(v))
                .unwrap_or(0) as f64
        };
        let Some(y) = metric_value(&o.report, metric) else {
            continue;
        };
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, points)) => points.push((x, y)),
            None => lines.push((name, vec![(x, y)])),
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let title = format!("{metric} by {key}");
    let chart = crate::report::charts::SweepChart {
        file: "sweep.png",
        title: &title,
        x_label: &key,
        y_label: metric,
        categories: if numeric { &[] } else { &categories },
    };
    crate::report::charts::render_sweep(dir, &chart, &lines).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_arguments_parse_values_as_toml_or_strings() {
        let s = parse_set("drainer.jitter=none,full").unwrap();
        assert_eq!(s.key, "drainer.jitter");
        assert_eq!(
            s.values,
            ["none", "full"].map(|v| toml::Value::String(v.into()))
        );
        let s = parse_set("workload.rate = 10, 2.5").unwrap();
        assert_eq!(
            s.values,
            [toml::Value::Integer(10), toml::Value::Float(2.5)]
        );
        let s = parse_set("spool.max_bytes=5 MiB,\"64KiB\"").unwrap();
        assert_eq!(value_text(&s.values[0]), "5 MiB");
        assert_eq!(value_text(&s.values[1]), "64KiB");
        assert!(
            parse_set("drainer.jitter")
                .unwrap_err()
                .to_string()
                .contains("KEY=VALUE")
        );
        assert!(parse_set("a..b=1").is_err());
        assert!(parse_set("a=1,,2").is_err());
    }

    const BASE: &str = r#"
name = "t"
seed = 1
start = 2026-10-08T10:00:00Z
duration = "10s"
[workload]
rate = 5
size = "1KiB"
"#;

    #[test]
    fn several_sets_make_a_grid_applied_to_the_scenario() {
        let sets = [
            parse_set("drainer.jitter=none,full").unwrap(),
            parse_set("workload.rate=1,2,3").unwrap(),
        ];
        let v = variants("t.toml", BASE, &sets).unwrap();
        assert_eq!(v.len(), 6);
        assert_eq!(v[0].label(), "drainer.jitter=none,workload.rate=1");
        assert_eq!(v[5].label(), "drainer.jitter=full,workload.rate=3");
        assert_eq!(v[5].scenario.drainer.backoff.jitter, spool::Jitter::Full);
        assert_eq!(v[5].scenario.workload.rate, 3.0);
        assert_eq!(v[0].dir_name(), "drainer.jitter=none_workload.rate=1");
    }

    #[test]
    fn a_bad_key_or_value_names_the_variant_and_the_field() {
        let err =
            variants("t.toml", BASE, &[parse_set("drainer.jiter=full").unwrap()]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("drainer.jiter=full") && text.contains("unknown field `jiter`"),
            "{text}"
        );
        let err = variants("t.toml", BASE, &[parse_set("spool.max_files=0").unwrap()]).unwrap_err();
        assert!(err.to_string().contains("spool.max_files"), "{err}");
        let err = variants("t.toml", BASE, &[parse_set("workload.rate.x=1").unwrap()]).unwrap_err();
        assert!(err.to_string().contains("not a table"), "{err}");
    }
}
