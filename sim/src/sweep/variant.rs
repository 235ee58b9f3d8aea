//! Variants of a scenario: one or more keys of the scenario file set to each of
//! several values (`--set KEY=V1,V2,...`; several make a grid).
//!
//! A key is a dotted path into the scenario file (`spool.max_bytes`,
//! `workload.rate`, `drainer.workers`, `drainer.jitter`); each value is parsed as a
//! TOML value (`64`, `0.5`, `true`), or taken as a string when it is not one
//! (`full`, `"5 MiB"`).

use anyhow::{Context, bail};

use crate::scenario::{self, Scenario};

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
    /// The scenario file's text with them applied.
    pub text: String,
}

impl Variant {
    /// `drainer.jitter=full,workload.rate=50`; `as written` for the scenario
    /// without settings.
    pub fn label(&self) -> String {
        if self.settings.is_empty() {
            return AS_WRITTEN.to_string();
        }
        self.settings
            .iter()
            .map(|(k, v)| format!("{k}={}", value_text(v)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `--set KEY=VALUE` arguments that make this variant, for a command line.
    pub fn set_args(&self) -> String {
        self.settings
            .iter()
            .map(|(k, v)| format!(" --set '{k}={}'", value_text(v)))
            .collect()
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

/// The label of the scenario as written, with no settings.
pub const AS_WRITTEN: &str = "as written";

/// Every combination of the `sets`, applied to the scenario file `text` (no sets:
/// the scenario as written).
pub fn variants(file: &str, text: &str, sets: &[SetArg]) -> anyhow::Result<Vec<Variant>> {
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
            let name = match label.is_empty() {
                true => file.to_string(),
                false => format!("{file} with {label}"),
            };
            let scenario = scenario::parse(&name, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(Variant {
                settings,
                scenario,
                text,
            })
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

#[cfg(test)]
pub(super) mod tests {
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

    /// A scenario of ten seconds, for the sweep's tests.
    pub(in crate::sweep) const BASE: &str = r#"
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
