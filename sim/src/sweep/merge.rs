//! Reading a sweep's results back: every file parsed, then checked before anything
//! is averaged: one sweep (the same scenario hash, build, variants and seeds in
//! every file), every (variant, seed) of it present, none twice. What is wrong is
//! named: the file, the missing runs, the duplicated ones, the field that differs;
//! and for missing runs, the shards they belong to, each with the command that
//! reruns it (from the `shardIofN.rerun` files the shards left beside their
//! results).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::bail;

use super::result::{FORMAT, RunResult};
use super::shard::{RERUN, Shard};

/// How many missing or duplicated runs (or shards) an error names before it counts
/// the rest.
const NAMED: usize = 10;

/// The results in `files` ((name, bytes), as [`super::Location::read_all`] reads
/// them: result files and the shards' rerun files), checked, in the sweep's order.
pub fn merge(files: &[(String, Vec<u8>)]) -> anyhow::Result<Vec<RunResult>> {
    let (reruns, files): (Vec<_>, Vec<_>) =
        files.iter().partition(|(name, _)| name.ends_with(RERUN));
    if files.is_empty() {
        bail!("no result files (*.json) there: nothing to merge");
    }
    let mut results = Vec::with_capacity(files.len());
    for (name, bytes) in files {
        let result: RunResult = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("{name}: not a sweep result: {e}"))?;
        if result.format != FORMAT {
            bail!(
                "{name}: result format {} (this sim reads {FORMAT})",
                result.format
            );
        }
        results.push((name.as_str(), result));
    }
    same_sweep(&results)?;
    let mut by_run: BTreeMap<(usize, u64), Vec<&str>> = BTreeMap::new();
    for (name, r) in &results {
        by_run.entry((r.variant, r.seed)).or_default().push(name);
    }
    let id = &results[0].1.sweep;
    let duplicated: Vec<String> = (by_run.iter())
        .filter(|(_, names)| names.len() > 1)
        .map(|((v, s), names)| {
            format!(
                "variant {} seed {s} in {}",
                id.variants[*v],
                names.join(" and ")
            )
        })
        .collect();
    let seeds = id.seeds[1] - id.seeds[0] + 1;
    // Missing runs by their index in the sweep's order (as `Plan::key` numbers them).
    let missing: Vec<(u64, String)> = (0..id.variants.len())
        .flat_map(|v| (id.seeds[0]..=id.seeds[1]).map(move |s| (v, s)))
        .filter(|key| !by_run.contains_key(key))
        .map(|(v, s)| {
            let i = v as u64 * seeds + (s - id.seeds[0]);
            (i, format!("variant {} seed {s}", id.variants[v]))
        })
        .collect();
    if !duplicated.is_empty() || !missing.is_empty() {
        let named: Vec<String> = missing.iter().map(|(_, run)| run.clone()).collect();
        bail!(
            "the results are not one whole sweep of {} runs:{}{}{}",
            id.runs(),
            listed("written more than once", &duplicated),
            listed("missing (a shard that failed or has not finished?)", &named),
            to_rerun(&results, &reruns, &missing, id.runs()),
        );
    }
    let mut results: Vec<RunResult> = results.into_iter().map(|(_, r)| r).collect();
    results.sort_by_key(|r| (r.variant, r.seed));
    Ok(results)
}

/// The shards that the `missing` runs (index, name) belong to, each with the
/// command that reruns it: the sweep's shard count is read from the names of the
/// result and rerun files, the command from a rerun file.
fn to_rerun(
    results: &[(&str, RunResult)],
    reruns: &[&(String, Vec<u8>)],
    missing: &[(u64, String)],
    runs: u64,
) -> String {
    if missing.is_empty() {
        return String::new();
    }
    let counts: BTreeSet<u64> = (results.iter().map(|(name, _)| *name))
        .chain(reruns.iter().map(|(name, _)| name.as_str()))
        .filter_map(Shard::of_file)
        .map(|shard| shard.count)
        .collect();
    let count = match counts.len() {
        1 => *counts.first().expect("one count"),
        _ => {
            let counts: Vec<String> = counts.iter().map(u64::to_string).collect();
            return format!(
                "\n  the results come from sweeps split {} ways: rerun the shards that hold the missing runs",
                counts.join(" and ")
            );
        }
    };
    let template = (reruns.iter())
        .filter(|(name, _)| Shard::of_file(name).is_some_and(|s| s.count == count))
        .find_map(|(_, bytes)| {
            let text = String::from_utf8_lossy(bytes).trim().to_string();
            (!text.is_empty()).then_some(text)
        });
    let mut by_shard: BTreeMap<u64, u64> = BTreeMap::new();
    for (i, _) in missing {
        *by_shard.entry(i % count).or_default() += 1;
    }
    let lines: Vec<String> = (by_shard.iter())
        .map(|(&index, &gone)| {
            let shard = Shard { index, count };
            let of = (0..runs).filter(|&i| shard.takes(i)).count();
            let command = match &template {
                Some(template) => shard.rerun_command(template),
                None => format!(
                    "run it as the others ran, with --shard {index}/{count} (no {} beside the results names the command)",
                    shard.rerun_file_name()
                ),
            };
            format!("\n    shard {index} ({gone} of {of} runs missing): {command}")
        })
        .collect();
    let more = match lines.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!("\n    and {n} more shards"),
    };
    format!(
        "\n  {} of {count} shards to run again (a shard rewrites its own runs only; merge again when they have finished):{}{more}",
        by_shard.len(),
        lines[..lines.len().min(NAMED)].concat()
    )
}

/// Every result belongs to the first one's sweep, or the error names the field.
fn same_sweep(results: &[(&str, RunResult)]) -> anyhow::Result<()> {
    let (first_name, first) = &results[0];
    for (name, r) in &results[1..] {
        let (a, b) = (&first.sweep, &r.sweep);
        let differs = [
            ("scenario", a.scenario != b.scenario),
            (
                "scenario_hash (the scenario file or the --set values changed)",
                a.scenario_hash != b.scenario_hash,
            ),
            ("build (another sim executable)", a.build != b.build),
            ("variants", a.variants != b.variants),
            ("seeds", a.seeds != b.seeds),
        ];
        if let Some((field, _)) = differs.iter().find(|(_, d)| *d) {
            bail!("{name} and {first_name} come from different sweeps: their {field} differ");
        }
        if r.variant >= b.variants.len() || !(b.seeds[0]..=b.seeds[1]).contains(&r.seed) {
            bail!(
                "{name}: variant {} seed {} is not a run of its sweep",
                r.variant,
                r.seed
            );
        }
    }
    Ok(())
}

fn listed(what: &str, runs: &[String]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let shown: Vec<&str> = runs.iter().take(NAMED).map(String::as_str).collect();
    let more = match runs.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(", and {n} more"),
    };
    format!("\n  {} {what}: {}{more}", runs.len(), shown.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::{Outcome, Plan};

    fn files(plan: &Plan, runs: &[(usize, u64, &str)]) -> Vec<(String, Vec<u8>)> {
        runs.iter()
            .map(|&(v, s, suffix)| {
                let r = plan.result(v, s, Outcome::Passed, None);
                (r.file_name(suffix), serde_json::to_vec(&r).unwrap())
            })
            .collect()
    }

    fn plan() -> Plan {
        let text = "name = \"t\"\nseed = 1\nstart = 2026-10-08T10:00:00Z\nduration = \"10s\"\n[workload]\nrate = 5\nsize = \"1KiB\"\n";
        Plan::new("t.toml", text, &[], Some(1..=3)).unwrap()
    }

    #[test]
    fn a_whole_sweep_merges_in_order() {
        let plan = plan();
        let merged = merge(&files(
            &plan,
            &[(0, 3, ".shard1of2"), (0, 1, ""), (0, 2, "")],
        ))
        .unwrap();
        let seeds: Vec<u64> = merged.iter().map(|r| r.seed).collect();
        assert_eq!(seeds, [1, 2, 3]);
    }

    #[test]
    fn gaps_duplicates_and_mixtures_are_named_not_averaged_in() {
        let plan = plan();
        let gap = merge(&files(&plan, &[(0, 1, ""), (0, 3, "")])).unwrap_err();
        assert!(gap.to_string().contains("1 missing"), "{gap}");
        assert!(gap.to_string().contains("seed 2"), "{gap}");
        let twice = files(
            &plan,
            &[(0, 1, ""), (0, 2, ""), (0, 3, ""), (0, 3, ".shard0of2")],
        );
        let err = merge(&twice).unwrap_err().to_string();
        assert!(
            err.contains("written more than once") && err.contains("seed 3"),
            "{err}"
        );
        let mut mixed = files(&plan, &[(0, 1, ""), (0, 2, ""), (0, 3, "")]);
        let mut other: RunResult = serde_json::from_slice(&mixed[2].1).unwrap();
        other.sweep.build = "sim 0.0.0 (another)".into();
        mixed[2].1 = serde_json::to_vec(&other).unwrap();
        let err = merge(&mixed).unwrap_err().to_string();
        assert!(err.contains("build"), "{err}");
        assert!(merge(&[]).is_err());
        let bad = vec![("x.json".to_string(), b"{}".to_vec())];
        assert!(merge(&bad).unwrap_err().to_string().contains("x.json"));
    }

    #[test]
    fn a_missing_shard_is_named_by_its_index_with_the_command_that_reruns_it() {
        let plan = plan();
        // Seeds 1..=3 in 2 shards: shard 0 takes seeds 1 and 3, shard 1 seed 2.
        let mut written = files(&plan, &[(0, 1, ".shard0of2"), (0, 3, ".shard0of2")]);
        let rerun = |name: &str| {
            let command = "sbatch --array={shard} run.sh --shards 2\n";
            (name.to_string(), command.as_bytes().to_vec())
        };
        written.push(rerun("shard0of2.rerun"));
        let err = merge(&written).unwrap_err().to_string();
        assert!(
            err.contains(
                "1 of 2 shards to run again (a shard rewrites its own runs only; \
                 merge again when they have finished):\n    \
                 shard 1 (1 of 1 runs missing): sbatch --array=1 run.sh --shards 2"
            ),
            "{err}"
        );
        assert!(!err.contains("shard 0 ("), "{err}");
        // Shard 0 killed half-way: named with what it still owes.
        let half = files(&plan, &[(0, 1, ".shard0of2"), (0, 2, ".shard1of2")]);
        let err = merge(&half).unwrap_err().to_string();
        assert!(err.contains("shard 0 (1 of 2 runs missing): "), "{err}");
        assert!(err.contains("--shard 0/2 (no shard0of2.rerun"), "{err}");
        // The rerun files are not results.
        let mut whole = files(&plan, &[(0, 1, ".shard0of2"), (0, 3, ".shard0of2")]);
        whole.extend(files(&plan, &[(0, 2, ".shard1of2")]));
        whole.push(rerun("shard1of2.rerun"));
        assert_eq!(merge(&whole).unwrap().len(), 3);
    }
}
