//! A sweep split into shards, each a separate `sim` process writing its results to
//! Cloud Storage (the fake, through `gs://`), merged, gives the report the same
//! sweep gives in one process, byte for byte, reading each result object once; and
//! merge names a shard that never ran (by its index, with the command that reruns
//! it) and a result written twice instead of averaging them in.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use fake_gcs::{FakeGcs, FakeGcsConfig, TokioClock};

const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/demo.toml");
const SEEDS: &str = "1..=8";

fn sim(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .env_remove("STORAGE_EMULATOR_HOST")
        .output()
        .expect("sim runs");
    eprintln!(
        "sim {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or("")
    );
    output
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sharded_sweep_merged_from_cloud_storage_is_the_sweep_run_in_one_process() {
    let config = FakeGcsConfig {
        buckets: vec!["sweeps".to_string()],
        keep_bytes: true,
        ..FakeGcsConfig::default()
    };
    let fake = FakeGcs::new(config, Arc::new(TokioClock::start())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fake.clone().serve_tcp(listener));
    let gets = {
        let fake = fake.clone();
        move || {
            (fake.stats().by_operation)
                .get("storage.objects.get")
                .copied()
                .unwrap_or(0)
        }
    };
    let work = tempfile::tempdir().unwrap();
    let out = |name: &str| work.path().join(name).to_str().unwrap().to_string();

    let blocking = tokio::task::spawn_blocking({
        let (endpoint, sharded, single, gappy, twice) = (
            endpoint.clone(),
            out("sharded"),
            out("single"),
            out("gappy"),
            out("twice"),
        );
        move || {
            for i in 0..4 {
                let shard = format!("{i}/4");
                let run = sim(&[
                    "sweep",
                    SCENARIO,
                    "--seeds",
                    SEEDS,
                    "--shard",
                    &shard,
                    "--results",
                    "gs://sweeps/run1",
                    "--endpoint",
                    &endpoint,
                    "--jobs",
                    "2",
                ]);
                assert!(run.status.success(), "shard {shard}: {run:?}");
            }
            let before = gets();
            let merged = sim(&[
                "merge",
                "gs://sweeps/run1",
                "--endpoint",
                &endpoint,
                "--out",
                &sharded,
            ]);
            assert!(merged.status.success(), "{merged:?}");
            // 8 results (and the 4 shards' .rerun files, which merge reads too).
            assert_eq!(gets() - before, 8 + 4, "merge reads each object once");
            let whole = sim(&[
                "sweep", SCENARIO, "--seeds", SEEDS, "--out", &single, "--jobs", "2",
            ]);
            assert!(whole.status.success(), "{whole:?}");

            // Shards 0 and 1 of 4 only: merge names what is missing.
            for i in 0..2 {
                let shard = format!("{i}/4");
                sim(&[
                    "sweep",
                    SCENARIO,
                    "--seeds",
                    SEEDS,
                    "--shard",
                    &shard,
                    "--results",
                    "gs://sweeps/run2",
                    "--endpoint",
                    &endpoint,
                ]);
            }
            let gap = sim(&[
                "merge",
                "gs://sweeps/run2",
                "--endpoint",
                &endpoint,
                "--out",
                &gappy,
            ]);
            // Every shard of 4, and shard 0 of 2 again: runs written twice.
            for shard in ["0/4", "1/4", "2/4", "3/4", "0/2"] {
                sim(&[
                    "sweep",
                    SCENARIO,
                    "--seeds",
                    SEEDS,
                    "--shard",
                    shard,
                    "--results",
                    "gs://sweeps/run3",
                    "--endpoint",
                    &endpoint,
                ]);
            }
            let dup = sim(&[
                "merge",
                "gs://sweeps/run3",
                "--endpoint",
                &endpoint,
                "--out",
                &twice,
            ]);
            (gap, dup)
        }
    });
    let (gap, dup) = blocking.await.unwrap();

    let (sharded, single) = (
        files(&work.path().join("sharded")),
        files(&work.path().join("single")),
    );
    let names: Vec<&str> = sharded.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["overflow.png", "runs.csv", "sweep.json", "sweep.md"]
    );
    assert!(
        sharded == single,
        "the sharded sweep's report differs from the single process's"
    );
    assert!(!gap.status.success());
    let gap = String::from_utf8_lossy(&gap.stderr);
    assert!(gap.contains("4 missing"), "{gap}");
    // Shards 2 and 3 never ran: named by index, each with the command that reruns
    // it (the shards' own, kept beside their results).
    assert!(gap.contains("2 of 4 shards to run again"), "{gap}");
    let scenario = std::fs::canonicalize(SCENARIO).unwrap();
    for i in [2, 3] {
        let rerun = format!(
            "shard {i} (2 of 2 runs missing): sim sweep {} --seeds 1..=8 --shard {i}/4 --results gs://sweeps/run2 --endpoint ",
            scenario.display()
        );
        assert!(gap.contains(&rerun), "no {rerun:?} in {gap}");
    }
    assert!(!gap.contains("shard 0 ("), "{gap}");
    assert!(!dup.status.success());
    let dup = String::from_utf8_lossy(&dup.stderr);
    assert!(dup.contains("4 written more than once"), "{dup}");
}
