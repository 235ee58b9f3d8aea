//! Prints the Grafana dashboard:
//! `cargo run -p spool --example print_dashboard > spool/dashboards/spool.json`;
//! with `--recording-rules`, every panel's query as a recording rule for `promtool
//! check rules` (`> spool/alerts/dashboard.rules.yml`).

use std::process::ExitCode;

use spool::metrics::dashboard;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => print!("{}", dashboard::dashboard_json()),
        [flag] if flag == "--recording-rules" => print!("{}", dashboard::recording_rules_yaml()),
        _ => {
            eprintln!("usage: print_dashboard [--recording-rules]");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
