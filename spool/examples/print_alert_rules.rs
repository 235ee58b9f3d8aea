//! Prints the shipped Prometheus alert rules:
//! `cargo run -p spool --example print_alert_rules > spool/alerts/spool.rules.yml`.
//! With `--runbook-base URL`, the `runbook_url` annotations point at `URL#anchor`
//! instead of the repository's `docs/runbook.md`.

use std::process::ExitCode;

use spool::alerts::{RulesOptions, rules_yaml_with};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runbook_base = match args.as_slice() {
        [] => spool::alerts::DEFAULT_RUNBOOK_BASE,
        [flag, url] if flag == "--runbook-base" => url.as_str(),
        _ => {
            eprintln!("usage: print_alert_rules [--runbook-base URL]");
            return ExitCode::from(2);
        }
    };
    print!(
        "{}",
        rules_yaml_with(&RulesOptions {
            runbook_base,
            ..RulesOptions::default()
        })
    );
    ExitCode::SUCCESS
}
