//! The fake's control API on a real port: fault windows relative to now (on a
//! clock the test moves), the plan in force, a reset, and the statistics.

mod common;

use std::time::Duration;

use common::{Read as _, config, manual_fake, send};
use fake_gcs::FakeGcsConfig;
use http::{Method, StatusCode};

const OUTAGE: &str = "[[fault]]\nname = \"now\"\nuntil = \"30s\"\nmix = { \"503\" = 1.0 }\n";

async fn put_status(base: &str, name: &str) -> StatusCode {
    send(base, Method::PUT, &format!("/bkt/{name}"), &[], "x")
        .await
        .status()
}

#[tokio::test]
async fn posted_windows_start_now_and_end_on_time() {
    let (fake, clock, base) = manual_fake(config(true)).await;
    clock.advance(Duration::from_secs(100));
    let posted = send(&base, Method::POST, "/_fake/faults", &[], OUTAGE).await;
    assert_eq!(posted.status(), StatusCode::OK, "{}", posted.text());
    let answer = posted.json();
    assert_eq!(answer["elapsed_ms"], 100_000);
    assert_eq!(answer["plan"]["fault"][0]["from"], "1m 40s");
    assert_eq!(answer["plan"]["fault"][0]["until"], "2m 10s");

    assert_eq!(
        put_status(&base, "a").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Writes only: a read is served.
    let read = send(&base, Method::GET, "/bkt/a", &[], "").await;
    assert_eq!(read.status(), StatusCode::NOT_FOUND);
    clock.advance(Duration::from_millis(29_999));
    assert_eq!(
        put_status(&base, "a").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(put_status(&base, "a").await, StatusCode::OK);
    assert_eq!(fake.stats().by_fault["503"], 2);
}

#[tokio::test]
async fn a_window_posted_now_wins_over_the_plan_the_fake_started_with() {
    let started = fake_gcs::FaultPlan::from_toml("[[fault]]\nmix = { \"429\" = 0.0 }\n").unwrap();
    let (_fake, _clock, base) = manual_fake(FakeGcsConfig {
        faults: started,
        ..config(true)
    })
    .await;
    // The window from the start takes every write and lets it succeed.
    assert_eq!(put_status(&base, "a").await, StatusCode::OK);
    let json = r#"{"fault": [{"mix": {"503": 1.0}}]}"#;
    let headers = [("content-type", "application/json")];
    let posted = send(&base, Method::POST, "/_fake/faults", &headers, json).await;
    assert_eq!(posted.status(), StatusCode::OK, "{}", posted.text());
    assert_eq!(
        put_status(&base, "a").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let plan = send(&base, Method::GET, "/_fake/faults", &[], "")
        .await
        .json();
    assert_eq!(plan["plan"]["fault"].as_array().unwrap().len(), 2);

    let cleared = send(&base, Method::DELETE, "/_fake/faults", &[], "").await;
    assert_eq!(cleared.json()["plan"], serde_json::json!({}));
    assert_eq!(put_status(&base, "a").await, StatusCode::OK);
}

#[tokio::test]
async fn a_bad_plan_is_refused_naming_its_field_and_changes_nothing() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let bad = "[[fault]]\nmix = { \"503\" = 0.7, hang = 0.6 }\n";
    let refused = send(&base, Method::POST, "/_fake/faults", &[], bad).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("invalid fault plan: fault[0].mix: probabilities sum to 1.3"),
        "{message}"
    );
    let not_json = send(&base, Method::POST, "/_fake/faults", &[], "{").await;
    assert!(not_json.text().contains("(json)"), "{}", not_json.text());
    assert!(fake.faults().windows.is_empty());
    let unknown = send(&base, Method::GET, "/_fake/nothing", &[], "").await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn stats_count_requests_but_not_the_control_api() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    assert_eq!(put_status(&base, "a").await, StatusCode::OK);
    assert_eq!(put_status(&base, "bb").await, StatusCode::OK);
    send(&base, Method::GET, "/bkt/missing", &[], "").await;
    let first = send(&base, Method::GET, "/_fake/stats", &[], "")
        .await
        .json();
    let stats = send(&base, Method::GET, "/_fake/stats", &[], "")
        .await
        .json();
    assert_eq!(first, stats, "reading the statistics changes them");
    assert_eq!(stats["requests"], 3);
    assert_eq!(stats["by_status"]["200"], 2);
    assert_eq!(stats["by_status"]["404"], 1);
    assert_eq!(stats["by_operation"]["storage.objects.insert"], 2);
    assert_eq!(stats["objects_committed"], 2);
    assert_eq!(
        stats["buckets"]["bkt"],
        serde_json::json!({ "objects": 2, "bytes": 2 })
    );
}

#[tokio::test]
async fn a_reset_clears_objects_faults_and_stats_but_keeps_the_buckets() {
    let (fake, _clock, base) = manual_fake(FakeGcsConfig {
        auto_create_buckets: true,
        ..config(true)
    })
    .await;
    assert_eq!(put_status(&base, "a").await, StatusCode::OK);
    let other = send(&base, Method::PUT, "/other/x", &[], "x").await;
    assert_eq!(other.status(), StatusCode::OK);
    let generation = fake.object("bkt", "a").unwrap().generation;
    send(
        &base,
        Method::POST,
        "/_fake/faults",
        &[],
        "[[fault]]\nops = \"reads\"\nmix = { \"500\" = 1.0 }\n",
    )
    .await;

    let reset = send(&base, Method::POST, "/_fake/reset", &[], "").await;
    assert_eq!(reset.status(), StatusCode::OK);
    assert_eq!(fake.stats(), fake_gcs::FakeStats::default());
    assert!(fake.faults().windows.is_empty());
    assert_eq!(fake.object_count("bkt"), 0);
    let buckets = send(&base, Method::GET, "/storage/v1/b", &[], "")
        .await
        .json();
    let names: Vec<_> = buckets["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].clone())
        .collect();
    assert_eq!(names, ["bkt"]);
    // Generations keep growing across a reset.
    assert_eq!(put_status(&base, "a").await, StatusCode::OK);
    assert!(fake.object("bkt", "a").unwrap().generation > generation);
}
