//! Tests of the fault plan and engine.

use std::time::Duration;

use bytesize::ByteSize;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::wire::Operation;

const EXAMPLE: &str = r#"
    [[fault]]
    name = "outage"
    from = "2s"
    until = "8s"
    ops = "writes"
    share = 0.5
    mix = { "503" = 0.5, hang = 0.25, slow = 0.25 }
    hang_for = "1m"
    slow = { min = "500ms", max = "20s" }
    stall_after = "64KiB"
    capacity_rps = 100

    [capacity]
    requests_per_second = 400
    burst = 800
"#;

#[test]
fn the_documented_plan_parses() {
    let plan = FaultPlan::from_toml(EXAMPLE).unwrap();
    let w = &plan.windows[0];
    assert_eq!(w.name.as_deref(), Some("outage"));
    assert_eq!(
        (w.from, w.until),
        (Duration::from_secs(2), Some(Duration::from_secs(8)))
    );
    assert_eq!(w.share, 0.5);
    assert_eq!(w.mix[&Outcome::Status503], 0.5);
    assert_eq!(w.mix[&Outcome::Hang], 0.25);
    assert_eq!(w.hang_for, Duration::from_secs(60));
    assert_eq!(w.stall_after, ByteSize::kib(64));
    assert_eq!(w.capacity_rps, Some(100.0));
    assert_eq!(
        plan.capacity,
        Some(RequestCapacity {
            requests_per_second: 400.0,
            burst: Some(800.0)
        })
    );
    // The same plan through plain serde (as a scenario file embeds it).
    let via_serde: FaultPlan = toml::from_str(EXAMPLE).unwrap();
    assert_eq!(via_serde, plan);
    let window = FaultPlan::from_toml("[[fault]]\nmix = { reset = 1 }\n").unwrap();
    assert_eq!(
        window.windows[0],
        FaultWindow {
            mix: [(Outcome::Reset, 1.0)].into(),
            ..FaultWindow::default()
        }
    );
}

fn error(text: &str) -> String {
    FaultPlan::from_toml(text).unwrap_err().to_string()
}

#[test]
fn a_wrong_key_is_named_with_its_window() {
    let e = error("[[fault]]\nmix = {}\n[[fault]]\nshar = 0.5\n");
    assert!(e.starts_with("fault[1]: unknown field `shar`"), "{e}");
    let e = error("[capacity]\nrps = 3\n");
    assert!(e.starts_with("capacity: unknown field `rps`"), "{e}");
    let e = error("[[faults]]\n");
    assert!(e.starts_with("faults: unknown key"), "{e}");
}

#[test]
fn probabilities_that_sum_past_one_are_refused() {
    let e = error("[[fault]]\n[[fault]]\n[[fault]]\nmix = { \"503\" = 0.7, hang = 0.6 }\n");
    assert!(
        e.starts_with("fault[2].mix: probabilities sum to 1.3;"),
        "{e}"
    );
    let e = error("[[fault]]\nmix = { hang = -0.1 }\n");
    assert!(e.starts_with("fault[0].mix.hang: probability -0.1"), "{e}");
}

#[test]
fn an_unknown_outcome_is_named_with_the_choices() {
    let e = error("[[fault]]\nmix = { \"504\" = 0.5 }\n");
    assert!(
        e.starts_with("fault[0].mix: unknown outcome \"504\""),
        "{e}"
    );
    assert!(e.contains("commit_then_503"), "{e}");
    // Plain serde (a scenario file) names it too.
    let e = toml::from_str::<FaultPlan>("[[fault]]\nmix = { \"504\" = 0.5 }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown outcome \"504\""), "{e}");
}

#[test]
fn other_bad_values_name_their_field() {
    for (text, prefix) in [
        (
            "[[fault]]\nfrom = \"5s\"\nuntil = \"1s\"\n",
            "fault[0].until:",
        ),
        ("[[fault]]\nshare = 1.5\n", "fault[0].share:"),
        ("[[fault]]\nhang_for = \"0s\"\n", "fault[0].hang_for:"),
        (
            "[[fault]]\nslow = { min = \"2s\", max = \"1s\" }\n",
            "fault[0].slow:",
        ),
        ("[[fault]]\ncapacity_rps = 0\n", "fault[0].capacity_rps:"),
        (
            "[capacity]\nrequests_per_second = 0\n",
            "capacity.requests_per_second:",
        ),
        ("[[fault]]\nfrom = \"soon\"\n", "fault[0]:"),
    ] {
        let e = error(text);
        assert!(e.starts_with(prefix), "{text:?} gave {e}");
    }
}

fn plan(window: FaultWindow) -> FaultPlan {
    FaultPlan {
        windows: vec![window],
        ..FaultPlan::default()
    }
}

fn outcomes(seed: u64, plan: &FaultPlan, n: usize) -> Vec<Option<Fault>> {
    let mut engine = FaultEngine::new(plan.clone(), seed);
    (0..n)
        .map(|i| {
            engine
                .decide(
                    Operation::ObjectsInsert,
                    None,
                    Duration::from_millis(i as u64),
                )
                .map(|(fault, _)| fault)
        })
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_outcomes_and_another_seed_does_not() {
    let plan = plan(FaultWindow {
        share: 0.8,
        mix: [
            (Outcome::Status503, 0.3),
            (Outcome::Hang, 0.3),
            (Outcome::Slow, 0.2),
        ]
        .into(),
        ..FaultWindow::default()
    });
    let a = outcomes(7, &plan, 200);
    assert_eq!(a, outcomes(7, &plan, 200));
    assert_ne!(a, outcomes(8, &plan, 200));
    let hangs = a
        .iter()
        .filter(|f| {
            matches!(
                f,
                Some(Fault::Window {
                    outcome: Outcome::Hang,
                    ..
                })
            )
        })
        .count();
    // 200 * 0.8 * 0.3 = 48 expected.
    assert!((25..75).contains(&hangs), "{hangs} hangs");
}

#[test]
fn windows_apply_only_to_their_operations_and_time() {
    let plan = plan(FaultWindow {
        from: Duration::from_secs(1),
        until: Some(Duration::from_secs(2)),
        mix: [(Outcome::Status503, 1.0)].into(),
        ..FaultWindow::default()
    });
    let mut engine = FaultEngine::new(plan, 1);
    let at = Duration::from_millis;
    assert_eq!(engine.decide(Operation::ObjectsInsert, None, at(999)), None);
    assert_eq!(engine.decide(Operation::ObjectsGet, None, at(1500)), None);
    assert_eq!(
        engine
            .decide(Operation::ObjectsInsert, None, at(1500))
            .map(|d| d.1),
        Some(Action::Respond(503))
    );
    assert_eq!(
        engine.decide(Operation::ObjectsDelete, None, at(2000)),
        None
    );
}

#[test]
fn slow_latencies_stay_within_their_bounds() {
    let slow = SlowLatency {
        min: Duration::from_millis(100),
        max: Duration::from_secs(10),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let samples: Vec<_> = (0..1000).map(|_| slow.sample(&mut rng)).collect();
    assert!(samples.iter().all(|d| *d >= slow.min && *d <= slow.max));
    // Log-uniform: about half below the geometric mean (1s).
    let below = samples
        .iter()
        .filter(|d| **d < Duration::from_secs(1))
        .count();
    assert!((400..600).contains(&below), "{below}");
}

#[test]
fn capacity_sheds_past_the_rate_and_refills_with_time() {
    let plan = FaultPlan {
        capacity: Some(RequestCapacity {
            requests_per_second: 10.0,
            burst: Some(5.0),
        }),
        ..FaultPlan::default()
    };
    let mut engine = FaultEngine::new(plan, 1);
    let t0 = Duration::from_secs(1);
    let shed = (0..8)
        .filter(|_| engine.decide(Operation::ObjectsGet, None, t0).is_some())
        .count();
    // The bucket starts full with 5 and refills 10/s; at t0 it is still full.
    assert_eq!(shed, 3);
    // 100 ms later one token is back.
    let later = t0 + Duration::from_millis(100);
    assert_eq!(engine.decide(Operation::ObjectsGet, None, later), None);
    assert_eq!(
        engine.decide(Operation::ObjectsGet, None, later),
        Some((Fault::Shed { window: None }, Action::Respond(503)))
    );
}

#[test]
fn a_window_capacity_applies_to_its_share_only() {
    let plan = plan(FaultWindow {
        capacity_rps: Some(2.0),
        ..FaultWindow::default()
    });
    let mut engine = FaultEngine::new(plan, 1);
    let t = Duration::from_secs(3);
    let shed: Vec<_> = (0..4)
        .map(|_| engine.decide(Operation::ObjectsInsert, None, t).is_some())
        .collect();
    assert_eq!(shed, [false, false, true, true]);
    assert_eq!(engine.decide(Operation::ObjectsGet, None, t), None);
}

#[test]
fn refusals_apply_to_matching_writes_when_no_window_takes_them() {
    let text = r#"
[[fault]]
from = "0s"
until = "1s"
mix = { "503" = 1.0 }

[[refuse]]
prefix = "poison/"
"#;
    let plan = FaultPlan::from_toml(text).unwrap();
    let mut engine = FaultEngine::new(plan, 1);
    let insert = Operation::ObjectsInsert;
    let during = Duration::from_millis(500);
    let after = Duration::from_secs(2);
    // The outage answers first; afterwards the permanent refusal shows.
    assert_eq!(
        engine
            .decide(insert, Some("poison/a"), during)
            .map(|(f, _)| f.label()),
        Some("503".to_string())
    );
    assert_eq!(
        engine.decide(insert, Some("poison/a"), after),
        Some((Fault::Refused { rule: 0 }, Action::Respond(403)))
    );
    assert_eq!(engine.decide(insert, Some("ok/a"), after), None);
    // An outcome that would land the object cannot land a refused one.
    let plan = FaultPlan::from_toml(
        "[[fault]]\nmix = { commit_then_503 = 1.0 }\n[[refuse]]\nprefix = \"poison/\"\n",
    )
    .unwrap();
    let mut engine = FaultEngine::new(plan, 1);
    assert_eq!(
        engine
            .decide(insert, Some("poison/a"), during)
            .map(|(f, _)| f),
        Some(Fault::Refused { rule: 0 })
    );
    assert_eq!(
        engine
            .decide(insert, Some("ok/a"), during)
            .map(|(f, _)| f.label()),
        Some("commit_then_503".to_string())
    );
    assert_eq!(
        engine.decide(Operation::ObjectsGet, Some("poison/a"), after),
        None
    );
}

#[test]
fn a_refusal_must_be_a_permanent_client_error() {
    let err = FaultPlan::from_toml("[[refuse]]\nprefix = \"p\"\nstatus = 503\n").unwrap_err();
    assert_eq!(err.field, "refuse[0].status");
    let err = FaultPlan::from_toml("[[refuse]]\nprefix = \"\"\n").unwrap_err();
    assert_eq!(err.field, "refuse[0].prefix");
}

#[test]
fn a_json_plan_reads_as_the_toml_one_and_names_a_bad_field() {
    let json =
        br#"{"fault": [{"until": "30s", "mix": {"503": 1.0}}], "refuse": [{"prefix": "p/"}]}"#;
    let toml = "[[fault]]\nuntil = \"30s\"\nmix = { \"503\" = 1.0 }\n[[refuse]]\nprefix = \"p/\"\n";
    assert_eq!(
        FaultPlan::from_json(json).unwrap(),
        FaultPlan::from_toml(toml).unwrap()
    );
    let e = FaultPlan::from_json(br#"{"fault": [{}, {"shar": 1}]}"#).unwrap_err();
    assert!(
        e.to_string().starts_with("fault[1]: unknown field `shar`"),
        "{e}"
    );
    let e = FaultPlan::from_json(b"[1]").unwrap_err();
    assert_eq!(e.field, "(json)");
}

#[test]
fn windows_added_later_count_from_then_and_come_first() {
    let started = FaultPlan::from_toml("[[fault]]\nmix = { \"429\" = 1.0 }\n").unwrap();
    let mut engine = FaultEngine::new(started, 1);
    let now = Duration::from_secs(100);
    let outage = FaultPlan::from_toml(
        "[[fault]]\nuntil = \"30s\"\nmix = { \"503\" = 1.0 }\n[capacity]\nrequests_per_second = 1\n",
    )
    .unwrap();
    engine.add(outage, now);
    let window = &engine.plan().windows[0];
    assert_eq!(
        (window.from, window.until),
        (now, Some(now + Duration::from_secs(30)))
    );
    let label = |engine: &mut FaultEngine, at| {
        engine
            .decide(Operation::ObjectsInsert, None, at)
            .map(|(fault, _)| fault.label())
    };
    assert_eq!(label(&mut engine, now), Some("503".to_string()));
    // The capacity added at `now` started full (one request), and is empty.
    assert_eq!(label(&mut engine, now), Some("shed".to_string()));
    let later = now + Duration::from_secs(31);
    assert_eq!(label(&mut engine, later), Some("429".to_string()));
    engine.clear();
    assert_eq!(label(&mut engine, later), None);
    assert_eq!(engine.plan(), &FaultPlan::none());
}
