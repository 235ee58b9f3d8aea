//! Prints the shipped Prometheus alert rules: `cargo run -p spool --example print_alert_rules > spool/alerts/spool.rules.yml`.

fn main() {
    print!("{}", spool::alerts::rules_yaml());
}
