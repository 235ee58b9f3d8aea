//! The spool's object-store sink, unchanged, inside turmoil: `spool::Remote` over
//! `object_store`'s GCS client with the turmoil connector, against the fake as a
//! turmoil host.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{BUCKET, config, plan, remote, turmoil_fake, world};
use spool::StoreError;
use spool::remote::Existing;
use tokio::time::sleep;

const T: Duration = Duration::from_secs(5);

#[test]
fn a_503_window_makes_the_sink_report_a_retryable_503() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[[fault]]\nfrom = \"1s\"\nuntil = \"10s\"\nmix = { \"503\" = 1.0 }\n"),
    ));
    let mut sim = world(&fake, 21);
    sim.client("app", async move {
        let remote = remote();
        remote
            .put_if_absent(
                "before",
                Bytes::from_static(b"1"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        sleep(Duration::from_secs(2)).await;
        let err = remote
            .put_if_absent(
                "during",
                Bytes::from_static(b"2"),
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
        assert!(err.is_retryable());
        sleep(Duration::from_secs(10)).await;
        remote
            .put_if_absent(
                "during",
                Bytes::from_static(b"2"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        Ok(())
    });
    sim.run()?;
    let names: Vec<_> = fake.objects(BUCKET).into_iter().map(|o| o.name).collect();
    assert_eq!(names, ["before", "during"]);
    Ok(())
}

#[test]
fn a_hang_window_makes_the_sinks_timeout_fire() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[[fault]]\nuntil = \"1m\"\nmix = { hang = 1.0 }\nhang_for = \"10m\"\n"),
    ));
    let mut sim = world(&fake, 22);
    sim.client("app", async move {
        let remote = remote();
        for _ in 0..3 {
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
        }
        sleep(Duration::from_secs(60)).await;
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
    let stats = fake.stats();
    assert_eq!(stats.by_fault.get("hang"), Some(&3));
    assert_eq!(stats.objects_committed, 1);
    Ok(())
}

#[test]
fn after_commit_then_503_the_retry_sees_412_and_the_object_is_there_once() -> turmoil::Result {
    let fake = turmoil_fake(config(
        false,
        plan("[[fault]]\nuntil = \"1s\"\nmix = { commit_then_503 = 1.0 }\n"),
    ));
    let mut sim = world(&fake, 23);
    sim.client("app", async move {
        let remote = remote();
        let payload = Bytes::from_static(b"{\"n\":1}");
        let err = remote
            .put_if_absent("e/1", payload.clone(), &object_store::Attributes::new(), T)
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
        sleep(Duration::from_secs(2)).await;
        let retry = remote
            .put_if_absent("e/1", payload.clone(), &object_store::Attributes::new(), T)
            .await
            .unwrap_err();
        assert!(matches!(retry, StoreError::AlreadyExists { .. }), "{retry}");
        assert_eq!(
            remote.check_existing("e/1", &payload, T).await?,
            Existing::Matches
        );
        Ok(())
    });
    sim.run()?;
    let objects = fake.objects(BUCKET);
    assert_eq!(objects.len(), 1);
    assert!(objects[0].matches(b"{\"n\":1}"));
    let stats = fake.stats();
    assert_eq!(
        (stats.objects_committed, stats.precondition_failures),
        (1, 1)
    );
    Ok(())
}

#[test]
fn a_partition_is_a_prompt_retryable_connect_error() -> turmoil::Result {
    let fake = turmoil_fake(config(false, fake_gcs::FaultPlan::none()));
    let mut sim = world(&fake, 24);
    sim.client("app", async move {
        turmoil::partition("app", "gcs");
        let started = tokio::time::Instant::now();
        let err = remote()
            .put_if_absent(
                "p",
                Bytes::from_static(b"p"),
                &object_store::Attributes::new(),
                T,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Unavailable { status: None, .. }),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        turmoil::repair("app", "gcs");
        remote()
            .put_if_absent(
                "p",
                Bytes::from_static(b"p"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        Ok(())
    });
    sim.run()?;
    assert_eq!(fake.object_count(BUCKET), 1);
    Ok(())
}

#[test]
fn the_fakes_state_survives_a_bounce_of_its_host_and_clients_reconnect() -> turmoil::Result {
    let fake = turmoil_fake(config(false, fake_gcs::FaultPlan::none()));
    let mut sim = world(&fake, 25);
    sim.client("app", async move {
        let remote = remote();
        remote
            .put_if_absent(
                "before",
                Bytes::from_static(b"1"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        sleep(Duration::from_secs(5)).await;
        // The pooled connection died with the old server; a fresh one is dialled.
        remote
            .put_if_absent(
                "after",
                Bytes::from_static(b"2"),
                &object_store::Attributes::new(),
                T,
            )
            .await?;
        let again = remote
            .put_if_absent(
                "before",
                Bytes::from_static(b"1"),
                &object_store::Attributes::new(),
                T,
            )
            .await
            .unwrap_err();
        assert!(matches!(again, StoreError::AlreadyExists { .. }), "{again}");
        Ok(())
    });
    while sim.elapsed() < Duration::from_secs(2) {
        sim.step()?;
    }
    sim.bounce("gcs");
    while !sim.step()? {}
    let names: Vec<_> = fake.objects(BUCKET).into_iter().map(|o| o.name).collect();
    assert_eq!(names, ["after", "before"]);
    Ok(())
}
