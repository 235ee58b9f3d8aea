//! The fields Cloud Storage computes or defaults on a bucket (issue 41): its
//! location, upper-cased, and location type, `rpo`; the values
//! `publicAccessPrevention` takes; the times autoclass, soft delete and
//! encryption enforcement configs take effect.

mod common;

use common::{Read as _, call, config, expect, manual_fake};
use http::{Method, StatusCode};
use std::time::Duration;

use serde_json::{Value, json};

#[tokio::test]
async fn a_new_bucket_shows_the_placement_and_rpo_the_service_computes() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let make = |body: Value| {
        let base = base.clone();
        async move { call(&base, Method::POST, "/storage/v1/b?project=p", body).await }
    };
    let plain = expect(&make(json!({ "name": "plain" })).await, StatusCode::OK);
    assert_eq!(
        (&plain["location"], &plain["locationType"], &plain["rpo"]),
        (&json!("US"), &json!("multi-region"), &json!("DEFAULT"))
    );
    for (name, location, shown, kind) in [
        ("one", "us-east1", "US-EAST1", "region"),
        ("many", "eu", "EU", "multi-region"),
        ("two", "nam4", "NAM4", "dual-region"),
        ("asia", "asia1", "ASIA1", "dual-region"),
    ] {
        let made = make(json!({ "name": name, "location": location })).await;
        let made = expect(&made, StatusCode::OK);
        assert_eq!(
            (&made["location"], &made["locationType"]),
            (&json!(shown), &json!(kind)),
            "{location}"
        );
        let got = call(
            &base,
            Method::GET,
            &format!("/storage/v1/b/{name}"),
            Value::Null,
        )
        .await;
        assert_eq!(expect(&got, StatusCode::OK)["locationType"], kind);
    }
    let custom = make(json!({
        "name": "custom",
        "location": "us",
        "customPlacementConfig": { "dataLocations": ["US-EAST1", "US-WEST1"] },
    }))
    .await;
    let custom = expect(&custom, StatusCode::OK);
    assert_eq!(
        (&custom["location"], &custom["locationType"]),
        (&json!("US"), &json!("dual-region"))
    );
    assert_eq!(
        custom["customPlacementConfig"]["dataLocations"][1],
        "US-WEST1"
    );
    // A bucket named at the start is described the same way.
    let named = call(&base, Method::GET, "/storage/v1/b/bkt", Value::Null).await;
    let named = expect(&named, StatusCode::OK);
    assert_eq!(
        (&named["location"], &named["rpo"]),
        (&json!("US"), &json!("DEFAULT"))
    );
}

#[tokio::test]
async fn public_access_prevention_is_inherited_or_enforced_and_nothing_else() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let pap = |value: &str| json!({ "iamConfiguration": { "publicAccessPrevention": value } });
    let mut bad = pap("sometimes");
    bad["name"] = json!("bad");
    let refused = call(&base, Method::POST, "/storage/v1/b?project=p", bad).await;
    assert_eq!(
        refused.status(),
        StatusCode::BAD_REQUEST,
        "{}",
        refused.text()
    );
    let missing = call(&base, Method::GET, "/storage/v1/b/bad", Value::Null).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let mut good = pap("enforced");
    good["name"] = json!("good");
    let made = call(&base, Method::POST, "/storage/v1/b?project=p", good).await;
    let made = expect(&made, StatusCode::OK);
    assert_eq!(
        made["iamConfiguration"]["publicAccessPrevention"],
        "enforced"
    );
    let patched = call(&base, Method::PATCH, "/storage/v1/b/good", pap("unknown")).await;
    assert_eq!(
        patched.status(),
        StatusCode::BAD_REQUEST,
        "{}",
        patched.text()
    );
    let patched = call(&base, Method::PATCH, "/storage/v1/b/good", pap("inherited")).await;
    let patched = expect(&patched, StatusCode::OK);
    assert_eq!(
        patched["iamConfiguration"]["publicAccessPrevention"],
        "inherited"
    );
}

#[tokio::test]
async fn autoclass_soft_delete_and_enforcement_times_are_stamped_when_they_change() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    let body = json!({
        "name": "timed",
        "autoclass": { "enabled": true },
        "softDeletePolicy": { "retentionDurationSeconds": "604800" },
        "encryption": {
            "googleManagedEncryptionEnforcementConfig": { "restrictionMode": "FullyRestricted" },
        },
    });
    let made = call(&base, Method::POST, "/storage/v1/b?project=p", body).await;
    let made = expect(&made, StatusCode::OK);
    let t0 = "2026-10-08T11:00:00.000Z";
    let autoclass = json!({
        "enabled": true,
        "toggleTime": t0,
        "terminalStorageClass": "NEARLINE",
        "terminalStorageClassUpdateTime": t0,
    });
    assert_eq!(made["autoclass"], autoclass);
    assert_eq!(made["softDeletePolicy"]["effectiveTime"], t0);
    let enforcement = &made["encryption"]["googleManagedEncryptionEnforcementConfig"];
    assert_eq!(enforcement["effectiveTime"], t0);
    // A minute on: what changes is stamped again, what does not keeps its time.
    clock.advance(Duration::from_secs(60));
    let t1 = "2026-10-08T11:01:00.000Z";
    let patch = json!({
        "autoclass": { "enabled": true, "terminalStorageClass": "ARCHIVE" },
        "softDeletePolicy": { "retentionDurationSeconds": "604800" },
    });
    let patched = call(&base, Method::PATCH, "/storage/v1/b/timed", patch).await;
    let patched = expect(&patched, StatusCode::OK);
    assert_eq!(patched["autoclass"]["toggleTime"], t0);
    assert_eq!(patched["autoclass"]["terminalStorageClass"], "ARCHIVE");
    assert_eq!(patched["autoclass"]["terminalStorageClassUpdateTime"], t1);
    assert_eq!(patched["softDeletePolicy"]["effectiveTime"], t0);
    let off = json!({ "autoclass": { "enabled": false } });
    let off = call(&base, Method::PATCH, "/storage/v1/b/timed", off).await;
    let off = expect(&off, StatusCode::OK);
    assert_eq!(
        off["autoclass"],
        json!({ "enabled": false, "toggleTime": t1 })
    );
}
