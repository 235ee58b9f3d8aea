//! Every fault kind, inside turmoil, checked from the client's side: what status or
//! transport error it sees, how long it waits, and what the bucket holds afterwards.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::{
    BUCKET, GCS_URL, config, plan, record_events, remote, send_turmoil, turmoil_fake, world,
};
use fake_gcs::{Fault, Instruction, Operation, Outcome};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use object_store::client::{HttpErrorKind, HttpRequestBody, HttpService};
use sim::connector::TurmoilHttp;
use spool::StoreError;
use tokio::time::{Instant, sleep, timeout};

const T: Duration = Duration::from_secs(5);

#[test]
fn scheduled_statuses_reach_the_client_with_real_error_bodies() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan(
            r#"
        [[fault]]
        until = "10s"
        mix = { "503" = 1.0 }
        [[fault]]
        from = "10s"
        until = "20s"
        mix = { "429" = 1.0 }
        [[fault]]
        from = "20s"
        until = "30s"
        mix = { "500" = 1.0 }
        [[fault]]
        from = "30s"
        until = "40s"
        mix = { "408" = 1.0 }
        "#,
        ),
    ));
    let mut sim = world(&fake, 1);
    sim.client("app", async move {
        let remote = remote();
        let http = TurmoilHttp::new(4);
        sleep(Duration::from_secs(1)).await;
        let json = send_turmoil(
            &http,
            Method::POST,
            "/upload/storage/v1/b/bkt/o?uploadType=media&name=j",
            &[],
            b"j",
        )
        .await?;
        assert_eq!(json.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(json.json()["error"]["code"], 503);
        assert_eq!(json.json()["error"]["errors"][0]["reason"], "backendError");
        let xml = send_turmoil(&http, Method::PUT, "/bkt/x", &[], b"x").await?;
        assert_eq!(xml.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(xml.text().starts_with("<?xml"), "{}", xml.text());
        for expected in [503, 429, 500, 408] {
            let err = remote
                .put_if_absent(
                    "obj",
                    Bytes::from_static(b"o"),
                    &object_store::Attributes::new(),
                    T,
                )
                .await
                .unwrap_err();
            assert!(
                matches!(err, StoreError::Unavailable { status: Some(s), .. } if s == expected),
                "expected {expected}: {err}"
            );
            assert!(err.is_retryable());
            sleep(Duration::from_secs(10)).await;
        }
        // After the last window the write lands.
        remote
            .put_if_absent(
                "obj",
                Bytes::from_static(b"o"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        Ok(())
    });
    sim.run()?;
    assert_eq!(fake.object_count(BUCKET), 1);
    let stats = fake.stats();
    for label in ["503", "429", "500", "408"] {
        assert!(
            stats.by_fault.get(label).is_some_and(|n| *n >= 1),
            "{label}: {stats:?}"
        );
    }
    Ok(())
}

#[test]
fn a_hang_lasts_until_the_client_gives_up_or_hang_for_ends() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[[fault]]\nuntil = \"100s\"\nmix = { hang = 1.0 }\nhang_for = \"60s\"\n"),
    ));
    let events = record_events(&fake);
    let mut sim = world(&fake, 2);
    sim.client("app", async move {
        let remote = remote();
        let started = Instant::now();
        let err = remote
            .put_if_absent(
                "h",
                Bytes::from_static(b"h"),
                &object_store::Attributes::new(),
                T,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Timeout(t) if t == T), "{err}");
        let waited = started.elapsed();
        assert!(
            waited >= T && waited < T + Duration::from_millis(100),
            "{waited:?}"
        );

        // A client without a timeout waits until the fake lets go after hang_for.
        let started = Instant::now();
        let http = TurmoilHttp::new(1);
        let err = send_turmoil(&http, Method::PUT, "/bkt/h", &[], b"h")
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.kind(),
                HttpErrorKind::Interrupted | HttpErrorKind::Request
            ),
            "{err:?}"
        );
        let waited = started.elapsed();
        assert!(waited >= Duration::from_secs(60), "{waited:?}");
        assert!(waited < Duration::from_secs(61), "{waited:?}");

        // After the window, the same client (fresh connection) succeeds.
        sleep(Duration::from_secs(40)).await;
        remote
            .put_if_absent(
                "h",
                Bytes::from_static(b"h"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        Ok(())
    });
    sim.run()?;
    let events = events.lock().unwrap();
    let hangs: Vec<_> = events.iter().filter(|e| e.status.is_none()).collect();
    assert_eq!(hangs.len(), 2, "{events:?}");
    for hang in &hangs {
        assert_eq!(
            hang.fault,
            Some(Fault::Window {
                window: 0,
                outcome: Outcome::Hang
            })
        );
    }
    // The first was released when the client dropped its connection (about 5 s),
    // the second after hang_for.
    assert!(
        hangs[0].took >= T - Duration::from_millis(100) && hangs[0].took < Duration::from_secs(6),
        "{:?}",
        hangs[0].took
    );
    assert!(
        hangs[1].took >= Duration::from_secs(60),
        "{:?}",
        hangs[1].took
    );
    assert_eq!(events.last().unwrap().status, Some(200));
    assert_eq!(fake.stats().dropped, 2);
    Ok(())
}

/// A hang ends when its client gives up also when hyper has not read the body with
/// the head (here a 256 KiB body; in the replay, whose network delays each segment,
/// bodies of any size): the fake takes the body in and hyper then sees the
/// connection close. It held the request for all of `hang_for` when it left the
/// body unread, keeping a task, a timer and the connection for ten minutes per hang
/// in the replay.
#[test]
fn a_hang_with_a_body_ends_when_the_client_gives_up() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[[fault]]\nuntil = \"100s\"\nmix = { hang = 1.0 }\nhang_for = \"60s\"\n"),
    ));
    let events = record_events(&fake);
    let mut sim = world(&fake, 2);
    sim.client("app", async move {
        let remote = remote();
        for (name, size) in [("small", 870), ("large", 256 * 1024)] {
            let err = remote
                .put_if_absent(
                    name,
                    Bytes::from(vec![7u8; size]),
                    &object_store::Attributes::new(),
                    T,
                )
                .await
                .unwrap_err();
            assert!(matches!(err, StoreError::Timeout(t) if t == T), "{err}");
        }
        // Long enough for hang_for to end, so a held request is reported too.
        sleep(Duration::from_secs(70)).await;
        Ok(())
    });
    sim.run()?;
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    for hang in events.iter() {
        assert_eq!(hang.status, None, "{hang:?}");
        assert!(
            hang.took >= T - Duration::from_millis(100) && hang.took < Duration::from_secs(6),
            "{:?} held for {:?}, after its client gave up at {T:?}",
            hang.object,
            hang.took
        );
    }
    Ok(())
}

#[test]
fn a_reset_drops_the_connection_without_a_status() -> turmoil::Result {
    let fake = turmoil_fake(config(false, plan("[[fault]]\nmix = { reset = 1.0 }\n")));
    let mut sim = world(&fake, 3);
    sim.client("app", async move {
        let http = TurmoilHttp::new(4);
        let err = send_turmoil(&http, Method::PUT, "/bkt/r", &[], b"r")
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.kind(),
                HttpErrorKind::Interrupted | HttpErrorKind::Request
            ),
            "{err:?}"
        );
        let err = remote()
            .put_if_absent(
                "r",
                Bytes::from_static(b"r"),
                &object_store::Attributes::new(),
                T,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Unavailable { status: None, .. }),
            "{err}"
        );
        Ok(())
    });
    sim.run()?;
    assert_eq!(fake.stats().dropped, 2);
    assert_eq!(fake.object_count(BUCKET), 0);
    Ok(())
}

#[test]
fn a_stall_moves_stall_after_bytes_then_holds_uploads_and_downloads() -> turmoil::Result {
    let fake = turmoil_fake(config(
        true,
        plan(
            r#"
        [[fault]]
        until = "40s"
        mix = { stall = 1.0 }
        stall_after = "16KiB"
        hang_for = "30s"
        [[fault]]
        from = "100s"
        ops = "reads"
        mix = { stall = 1.0 }
        stall_after = "16KiB"
        hang_for = "30s"
        "#,
        ),
    ));
    let events = record_events(&fake);
    let mut sim = world(&fake, 4);
    let observed = fake.clone();
    sim.client("app", async move {
        let remote = remote();
        let big = Bytes::from(vec![7u8; 64 * 1024]);
        let err = remote
            .put_if_absent(
                "s",
                big.clone(),
                &object_store::Attributes::new(),
                Duration::from_secs(10),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Timeout(_)), "{err}");
        assert!(observed.object("bkt", "s").is_none());
        sleep(Duration::from_secs(50)).await;
        remote
            .put_if_absent("s", big.clone(), &object_store::Attributes::new(), T)
            .await?;

        sleep(Duration::from_secs(60)).await; // into the read window
        let http = TurmoilHttp::new(4);
        let req = http::Request::get(format!("{GCS_URL}/storage/v1/b/bkt/o/s?alt=media"))
            .body(HttpRequestBody::empty())
            .unwrap();
        let response = http.call(req).await?;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-length"], "65536");
        let mut body = response.into_body();
        let mut got = 0;
        loop {
            match timeout(T, body.frame()).await {
                Ok(Some(Ok(frame))) => got += frame.into_data().map_or(0, |d| d.len()),
                Ok(other) => panic!("the stalled body ended: {other:?}"),
                Err(_) => break,
            }
        }
        assert_eq!(got, 16 * 1024);
        Ok(())
    });
    sim.run()?;
    let events = events.lock().unwrap();
    assert_eq!(events[0].status, None);
    assert_eq!(
        events[0].fault,
        Some(Fault::Window {
            window: 0,
            outcome: Outcome::Stall
        })
    );
    Ok(())
}

#[test]
fn a_slow_success_takes_at_least_the_minimum_latency_and_lands() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[[fault]]\nmix = { slow = 1.0 }\nslow = { min = \"2s\", max = \"3s\" }\n"),
    ));
    let mut sim = world(&fake, 5);
    sim.client("app", async move {
        let remote = remote();
        for i in 0..5 {
            let started = Instant::now();
            remote
                .put_if_absent(
                    &format!("slow/{i}"),
                    Bytes::from_static(b"s"),
                    &object_store::Attributes::new(),
                    Duration::from_secs(10),
                )
                .await?;
            let took = started.elapsed();
            assert!(took >= Duration::from_secs(2), "{took:?}");
            assert!(took < Duration::from_millis(3500), "{took:?}");
        }
        Ok(())
    });
    sim.run()?;
    assert_eq!(fake.object_count(BUCKET), 5);
    assert_eq!(fake.stats().by_fault.get("slow"), Some(&5));
    Ok(())
}

#[test]
fn commit_then_fail_lands_the_object_but_the_client_sees_a_failure() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan(
            r#"
        [[fault]]
        until = "10s"
        mix = { commit_then_503 = 1.0 }
        [[fault]]
        from = "10s"
        until = "20s"
        mix = { commit_then_hang = 1.0 }
        hang_for = "1m"
        "#,
        ),
    ));
    let events = record_events(&fake);
    let mut sim = world(&fake, 6);
    let observed = fake.clone();
    sim.client("app", async move {
        let remote = remote();
        let err = remote
            .put_if_absent(
                "c503",
                Bytes::from_static(b"a"),
                &object_store::Attributes::new(),
                T,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Unavailable {
                    status: Some(503),
                    ..
                }
            ),
            "{err}"
        );
        assert!(observed.object("bkt", "c503").is_some());
        sleep(Duration::from_secs(10)).await;
        let err = remote
            .put_if_absent(
                "chang",
                Bytes::from_static(b"b"),
                &object_store::Attributes::new(),
                T,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Timeout(_)), "{err}");
        assert!(observed.object("bkt", "chang").is_some());
        // Let the fake notice the client gave up, so the event is reported.
        sleep(Duration::from_secs(1)).await;
        Ok(())
    });
    sim.run()?;
    let events = events.lock().unwrap();
    assert!(events[0].committed && events[0].status == Some(503));
    assert!(events[1].committed && events[1].status.is_none());
    assert_eq!(fake.stats().objects_committed, 2);
    Ok(())
}

#[test]
fn past_capacity_a_herd_is_shed_with_503_and_the_bucket_refills() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[capacity]\nrequests_per_second = 5\nburst = 5\n"),
    ));
    let mut sim = world(&fake, 7);
    let observed = fake.clone();
    sim.client("app", async move {
        let herd = |round: usize| async move {
            let tasks: Vec<_> = (0..20)
                .map(|i| {
                    tokio::spawn(async move {
                        remote()
                            .put_if_absent(
                                &format!("{round}/{i}"),
                                Bytes::from_static(b"x"),
                                &object_store::Attributes::new(),
                                T,
                            )
                            .await
                    })
                })
                .collect();
            let mut ok = 0;
            for task in tasks {
                match task.await.unwrap() {
                    Ok(()) => ok += 1,
                    Err(StoreError::Unavailable {
                        status: Some(503), ..
                    }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            ok
        };
        let ok = herd(0).await;
        // Five tokens, plus at most one refilled while the herd arrives.
        assert!((5..=6).contains(&ok), "{ok} succeeded");
        assert_eq!(observed.stats().shed, 20 - ok as u64);
        sleep(Duration::from_secs(2)).await;
        // Spread out, the same load fits.
        for i in 0..10 {
            remote()
                .put_if_absent(
                    &format!("spread/{i}"),
                    Bytes::from_static(b"x"),
                    &object_store::Attributes::new(),
                    T,
                )
                .await?;
            sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    });
    sim.run()?;
    assert_eq!(
        fake.stats().by_fault.get("shed").copied(),
        Some(fake.stats().shed)
    );
    Ok(())
}

#[test]
fn testbench_instructions_script_single_requests_by_header() -> turmoil::Result {
    let fake = turmoil_fake(config(true, fake_gcs::FaultPlan::none()));
    let mut sim = world(&fake, 8);
    let scripted = fake.clone();
    sim.client("app", async move {
        let http = TurmoilHttp::new(4);
        let created = send_turmoil(
            &http,
            Method::POST,
            "/retry_test",
            &[("content-type", "application/json")],
            br#"{"instructions": {
                "storage.objects.insert": ["return-503", "return-reset-connection", "return-503-after-1K"],
                "storage.objects.get": ["return-broken-stream", "stall-for-3s-after-1K"]
            }}"#,
        )
        .await?;
        assert_eq!(created.status, StatusCode::OK, "{}", created.text());
        let id = created.json()["id"].as_str().unwrap().to_string();
        let with_id = [("x-retry-test-id", id.as_str())];
        let body = vec![b'z'; 4096];

        let first = send_turmoil(&http, Method::PUT, "/bkt/t", &with_id, &body).await?;
        assert_eq!(first.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(send_turmoil(&http, Method::PUT, "/bkt/t", &with_id, &body).await.is_err());
        let third = send_turmoil(&http, Method::PUT, "/bkt/t", &with_id, &body).await?;
        assert_eq!(third.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(scripted.object("bkt", "t").is_none());
        let fourth = send_turmoil(&http, Method::PUT, "/bkt/t", &with_id, &body).await?;
        assert_eq!(fourth.status, StatusCode::OK);
        // Requests without the header are not affected.
        let other = send_turmoil(&http, Method::PUT, "/bkt/u", &[], b"u").await?;
        assert_eq!(other.status, StatusCode::OK);

        let broken = send_turmoil(&http, Method::GET, "/bkt/t", &with_id, b"").await;
        assert!(broken.is_err(), "{broken:?}");
        let started = Instant::now();
        let stalled = send_turmoil(&http, Method::GET, "/bkt/t", &with_id, b"").await?;
        assert_eq!(stalled.body.len(), 4096);
        assert!(started.elapsed() >= Duration::from_secs(3));

        let state = send_turmoil(&http, Method::GET, &format!("/retry_test/{id}"), &[], b"").await?;
        assert_eq!(state.json()["completed"], true);
        let unknown = send_turmoil(&http, Method::PUT, "/bkt/v", &[("x-retry-test-id", "rt-nope")], b"v").await?;
        assert_eq!(unknown.status, StatusCode::BAD_REQUEST);

        // The Rust API: scripted for any request of the operation, header or not.
        scripted.script(Operation::ObjectsInsert, [Instruction::Return(429)]);
        let err = remote().put_if_absent("w", Bytes::from_static(b"w"), &object_store::Attributes::new(), T).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable { status: Some(429), .. }), "{err}");
        let id = scripted.create_retry_test(BTreeMap::from([(Operation::ObjectsGet, vec![Instruction::Return(500)])]));
        let get = send_turmoil(&http, Method::GET, "/bkt/u", &[("x-retry-test-id", id.as_str())], b"").await?;
        assert_eq!(get.status, StatusCode::INTERNAL_SERVER_ERROR);
        Ok(())
    });
    sim.run()?;
    let stats = fake.stats();
    assert_eq!(stats.by_fault.get("return-503"), Some(&1));
    assert_eq!(stats.by_fault.get("return-503-after-1K"), Some(&1));
    assert_eq!(stats.by_fault.get("stall-for-3s-after-1K"), Some(&1));
    Ok(())
}

/// Runs 60 sequential writes against a mixed window; returns what each saw.
fn mixed_run(fake_seed: u64) -> Vec<(Duration, Option<String>, Option<u16>)> {
    let mut cfg = config(
        false,
        plan(
            r#"
        [[fault]]
        share = 0.9
        mix = { "503" = 0.3, "429" = 0.2, reset = 0.1, slow = 0.1 }
        slow = { min = "100ms", max = "1s" }
        "#,
        ),
    );
    cfg.seed = fake_seed;
    let fake = turmoil_fake(cfg);
    let events = record_events(&fake);
    let mut sim = world(&fake, 99);
    sim.client("app", async move {
        let http = TurmoilHttp::new(2);
        for i in 0..60 {
            let _ = send_turmoil(&http, Method::PUT, &format!("/bkt/{i}"), &[], b"x").await;
        }
        Ok(())
    });
    sim.run().unwrap();
    let events = events.lock().unwrap();
    events
        .iter()
        .map(|e| (e.at, e.fault.as_ref().map(Fault::label), e.status))
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_answers_and_another_seed_does_not() {
    let a = mixed_run(11);
    assert_eq!(a.len(), 60);
    assert_eq!(a, mixed_run(11));
    let b = mixed_run(12);
    let faults = |run: &[(Duration, Option<String>, Option<u16>)]| {
        run.iter().map(|(_, f, _)| f.clone()).collect::<Vec<_>>()
    };
    assert_ne!(faults(&a), faults(&b));
    let kinds: std::collections::BTreeSet<_> = a.iter().filter_map(|(_, f, _)| f.clone()).collect();
    assert!(kinds.len() >= 3, "{kinds:?}");
}
