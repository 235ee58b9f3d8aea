//! The batch engines' deploy files as a user runs them, with no edit: a sweep of
//! another size than the shipped one through `deploy/slurm-array.sh` (under a
//! stand-in `sbatch` that runs each array task here, from a copy of the script in
//! a spool directory, as Slurm does), submitted from a directory that is not the
//! repository; `sim merge` naming a lost shard by its index with the command that
//! resubmits it; that command run as printed; the merge then whole; and a finding
//! printed by merge with the command that replays it.
//! `deploy/k8s-indexed-job.sh` is checked by `.ci/run` (kubernetes-validate).

use std::path::Path;
use std::process::{Command, Output};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Slurm's `sbatch`, as far as the script uses it: `--array=LIST` (`A-B` ranges
/// and commas), options, the script and its arguments. Each task runs in the
/// submit directory with `SLURM_ARRAY_TASK_ID` set, from a copy of the script.
const SBATCH: &str = r#"#!/usr/bin/env bash
set -euo pipefail
array=
while [ $# -gt 0 ]; do
    case $1 in
        --array=*) array=${1#--array=}; shift ;;
        --*=*) shift ;;
        *) break ;;
    esac
done
script=$1; shift
spool=$(mktemp -d)
cp "$script" "$spool/slurm_script"
for part in ${array//,/ }; do
    case $part in
        *-*) tasks=$(seq "${part%-*}" "${part#*-}") ;;
        *) tasks=$part ;;
    esac
    for i in $tasks; do
        echo "task $i" >> sbatch.log
        SLURM_JOB_ID=7 SLURM_ARRAY_JOB_ID=7 SLURM_ARRAY_TASK_ID=$i \
            bash "$spool/slurm_script" "$@" > "sweep-7-$i.log" 2>&1 \
            || echo "task $i exited $?" >> sbatch.log
    done
done
echo "Submitted batch job 7"
"#;

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("runs");
    eprintln!(
        "{command:?}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn report(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_slurm_sweep_of_another_size_runs_without_an_edit_and_merge_names_the_shard_to_resubmit() {
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    let submit = work.path().join("elsewhere");
    let results = work.path().join("results");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&submit).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(&sbatch, SBATCH).unwrap();
    std::fs::set_permissions(&sbatch, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = Path::new(REPO).join("deploy/slurm-array.sh");
    let sim = env!("CARGO_BIN_EXE_sim");
    let shell = |line: &str| {
        run(Command::new("bash")
            .args(["-c", line])
            .current_dir(&submit)
            .env("PATH", &path)
            .env_remove("STORAGE_EMULATOR_HOST"))
    };

    // 3 shards of seeds 1..=6 (the script ships 16 of 1..=1000), the scenario as
    // the repository names it, from a directory where that path means nothing.
    let sweep = shell(&format!(
        "{} --shards 3 --seeds 1..=6 --scenario scenarios/demo.toml --results {} --sim {sim}",
        script.display(),
        results.display()
    ));
    assert!(sweep.status.success());
    let tasks = std::fs::read_to_string(submit.join("sbatch.log")).unwrap();
    assert_eq!(tasks, "task 0\ntask 1\ntask 2\n", "every task passed");
    let merge = |out: &str| {
        run(Command::new(sim)
            .args(["merge", results.to_str().unwrap(), "--out", out])
            .current_dir(work.path()))
    };
    let first = work.path().join("first");
    assert!(merge(first.to_str().unwrap()).status.success());

    // Shard 1's results lost: merge names the shard and the command that resubmits
    // it, this script with the same parameters.
    for entry in std::fs::read_dir(&results).unwrap() {
        let entry = entry.unwrap().path();
        if entry.to_str().unwrap().ends_with(".shard1of3.json") {
            std::fs::remove_file(entry).unwrap();
        }
    }
    let gap = merge(work.path().join("gap").to_str().unwrap());
    assert_eq!(gap.status.code(), Some(2));
    let gap = String::from_utf8_lossy(&gap.stderr).into_owned();
    assert!(gap.contains("2 missing"), "{gap}");
    let prefix = "    shard 1 (2 of 2 runs missing): ";
    let line = (gap.lines())
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no shard 1 in {gap}"));
    let command = &line[prefix.len()..];
    let script = std::fs::canonicalize(&script).unwrap();
    let scenario = std::fs::canonicalize(Path::new(REPO).join("scenarios/demo.toml")).unwrap();
    let expected = format!(
        "{} --shards 3 --seeds 1..=6 --scenario {} --results {} --sim {} --only 1",
        script.display(),
        scenario.display(),
        results.display(),
        std::fs::canonicalize(sim).unwrap().display()
    );
    assert_eq!(command, expected);
    assert!(
        !gap.contains("shard 0 (") && !gap.contains("shard 2 ("),
        "{gap}"
    );

    // The command as printed resubmits shard 1 alone; then the merge is whole and
    // its report the same.
    std::fs::remove_file(submit.join("sbatch.log")).unwrap();
    assert!(shell(command).status.success());
    let tasks = std::fs::read_to_string(submit.join("sbatch.log")).unwrap();
    assert_eq!(tasks, "task 1\n");
    let again = work.path().join("again");
    assert!(merge(again.to_str().unwrap()).status.success());
    assert!(report(&first) == report(&again), "the reports differ");

    // A finding (seed 4's result as a failed run would write it): merge prints it
    // with the command that replays it, and exits 1.
    let seed4 = (std::fs::read_dir(&results).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().contains(".s00000000000000000004."))
        .unwrap();
    let mut result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&seed4).unwrap()).unwrap();
    result["outcome"] = "failed".into();
    result["invariants"] = serde_json::json!(["no_loss: 1 acknowledged write lost"]);
    std::fs::write(&seed4, serde_json::to_vec(&result).unwrap()).unwrap();
    let found = merge(work.path().join("found").to_str().unwrap());
    assert_eq!(found.status.code(), Some(1));
    let expected = format!(
        "FINDING as written seed 4: no_loss: 1 acknowledged write lost; replay with `sim {} --seed 4`",
        scenario.display()
    );
    let stdout = String::from_utf8_lossy(&found.stdout);
    assert!(stdout.contains(&expected), "no {expected:?} in {stdout}");
}

#[test]
fn the_slurm_script_refuses_what_it_cannot_run_before_submitting() {
    let script = Path::new(REPO).join("deploy/slurm-array.sh");
    let sim = env!("CARGO_BIN_EXE_sim");
    let refused = |args: &[&str]| {
        let out =
            run(Command::new("bash")
                .arg(&script)
                .args(args)
                .args(["--sim", sim, "--dry-run"]));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(refused(&["--scenario", "scenarios/nonesuch.toml"]).contains("no scenario"));
    assert!(refused(&["--shards", "0"]).contains("a positive count"));
    assert!(refused(&["--shards", "4", "--only", "4"]).contains("not below --shards 4"));
    // What it would submit: the array of the count given, absolute paths.
    let dry = run(Command::new("bash").arg(&script).args([
        "--shards",
        "5",
        "--seeds",
        "1..=50",
        "--scenario",
        "scenarios/demo.toml",
        "--results",
        "/scratch/sweeps/demo-50",
        "--sim",
        sim,
        "--dry-run",
    ]));
    assert!(dry.status.success());
    let dry = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.starts_with("sbatch --array=0-4 --job-name=spool-sweep-demo "),
        "{dry}"
    );
    assert!(
        dry.contains(" --task --shards 5 --seeds 1..=50 --scenario /"),
        "{dry}"
    );
}
