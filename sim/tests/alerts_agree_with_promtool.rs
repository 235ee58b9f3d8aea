//! The alert windows a run's report shows are the ones Prometheus itself computes:
//! each host's recorded scrapes of simulated runs become the input series of a
//! `promtool test rules` file, and the report's windows, read back as "firing or
//! not at every evaluation", become its expectations. promtool then evaluates the
//! shipped rules (spool/alerts/spool.rules.yml, without annotations) on those
//! series; a disagreement at any instant fails. Skipped with a notice when
//! `promtool` is not on `PATH`, unless `SPOOL_REQUIRE_PROMTOOL=1`.

use std::path::Path;
use std::time::Duration;

use spool::alerts::{PromtoolTest, RULES, RulesOptions, Scrape, Scrapes, rules_yaml_with};
use spool::testing::tools;

/// Whether `rule` fires at `t` on `host` according to the report's windows.
fn report_says(series: &sim::report::series::Series, rule: &str, host: u32, t: Duration) -> bool {
    series.alerts.iter().any(|w| {
        w.name == rule && w.host == host && w.fired <= t && w.resolved.is_none_or(|r| t < r)
    })
}

#[test]
fn the_reports_alert_windows_are_what_promtool_evaluates_on_the_same_scrapes() {
    let Some(bin) = tools::tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_yaml_with(&RulesOptions {
        annotations: false,
        ..RulesOptions::default()
    });
    std::fs::write(dir.path().join("rules.yml"), rules).unwrap();
    let mut fired_somewhere = std::collections::BTreeSet::new();
    for name in ["disk-full", "poison", "bad-disk"] {
        let path = format!("{}/../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        let scenario = sim::scenario::load(Path::new(&path)).unwrap();
        let output = sim::world::run(scenario, Default::default()).unwrap();
        let series = sim::report::series::build(&output);
        let recorder = &output.recorder;
        let last = recorder.index(output.scenario.duration);
        for (host, samples) in recorder.host_samples.iter().enumerate() {
            let host = host as u32;
            let scrapes: Vec<Option<Scrape>> = (0..=last)
                .map(|k| samples.get(&k).map(|s| s.scrape))
                .collect();
            let scrapes = Scrapes {
                interval: recorder.sample,
                scrapes: &scrapes,
            };
            let mut expected = Vec::new();
            for rule in RULES {
                for k in 0..=last {
                    let t = recorder.sample * k as u32;
                    let firing = report_says(&series, rule.name, host, t);
                    if firing {
                        fired_somewhere.insert(rule.name);
                    }
                    expected.push((rule.name, t.as_secs(), firing));
                }
            }
            let series = scrapes.input_series();
            let instance = format!("host{host}");
            let test = PromtoolTest {
                rule_file: "rules.yml",
                interval: recorder.sample,
                target_labels: &[("instance", &instance)],
                series: &series,
                expected: &expected,
            }
            .to_yaml()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            std::fs::write(dir.path().join("test.yml"), test).unwrap();
            if let Err(out) = tools::run(&bin, dir.path(), &["test", "rules", "test.yml"]) {
                panic!("{name} host {host}: promtool disagrees with the report:\n{out}");
            }
        }
    }
    // The comparison means something only if alerts fired in it.
    assert!(
        fired_somewhere.len() >= 3,
        "too few rules fired to compare: {fired_somewhere:?}"
    );
}
