//! Which share of a sweep's runs one process takes: `--shard I/N` takes every run
//! whose index is I modulo N. `I` may name an environment variable instead of a
//! number, so that a batch engine's own index is used as it is:
//! `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job), `SLURM_ARRAY_TASK_ID` (a Slurm
//! job array).
//!
//! A shard's result files carry `.shardIofN` in their names, and beside them it
//! leaves `shardIofN.rerun`: the command that runs a shard of its sweep again, with
//! [`PLACEHOLDER`] for the index (the batch engine's own command when the deploy
//! script gives one), so that merge can name a missing shard and how to rerun it.

use anyhow::{Context, bail};

/// One shard of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, from 0.
    pub index: u64,
    /// How many shards the sweep is split into.
    pub count: u64,
}

impl Shard {
    /// The whole sweep in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N`, where `I` is a number or the name of an environment variable
    /// holding one (read through `env`).
    pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Shard> {
        let Some((index, count)) = text.split_once('/') else {
            bail!("--shard {text:?}: expected I/N, e.g. 3/16 or JOB_COMPLETION_INDEX/16");
        };
        let count: u64 = count
            .trim()
            .parse()
            .with_context(|| format!("--shard {text:?}: {count:?} is not a shard count"))?;
        let index = index.trim().trim_start_matches('$');
        let index: u64 = match index.parse() {
            Ok(index) => index,
            Err(_) => {
                let value = env(index).with_context(|| {
                    format!("--shard {text:?}: the environment variable {index} is not set")
                })?;
                value.trim().parse().with_context(|| {
                    format!("--shard {text:?}: {index}={value:?} is not a shard index")
                })?
            }
        };
        if count == 0 || index >= count {
            bail!("--shard {text:?}: the index must be below the count (0 <= I < N)");
        }
        Ok(Shard { index, count })
    }

    /// Whether run `i` (its index in the sweep's order) is this shard's.
    pub fn takes(&self, i: u64) -> bool {
        i % self.count == self.index
    }

    /// The suffix that names this shard in result file names (none for the whole).
    pub fn suffix(&self) -> String {
        match self.count {
            1 => String::new(),
            n => format!(".shard{}of{n}", self.index),
        }
    }

    /// The name of the file that says how to rerun a shard of this sweep.
    pub fn rerun_file_name(&self) -> String {
        format!("shard{}of{}{RERUN}", self.index, self.count)
    }

    /// The shard that wrote the file `name`: a result file (`...shardIofN.json`;
    /// [`Shard::WHOLE`] without a suffix) or a rerun file (`shardIofN.rerun`).
    pub fn of_file(name: &str) -> Option<Shard> {
        let stem = match name.strip_suffix(RERUN) {
            Some(stem) => stem.strip_prefix("shard")?,
            None => match name.strip_suffix(".json")?.rsplit_once(".shard") {
                Some((_, stem)) => stem,
                None => return Some(Shard::WHOLE),
            },
        };
        let (index, count) = stem.split_once("of")?;
        let shard = Shard {
            index: index.parse().ok()?,
            count: count.parse().ok()?,
        };
        (shard.index < shard.count).then_some(shard)
    }

    /// `template` (a rerun file's command) for this shard: [`PLACEHOLDER`] replaced
    /// by its index.
    pub fn rerun_command(&self, template: &str) -> String {
        template.replace(PLACEHOLDER, &self.index.to_string())
    }
}

/// What a rerun command has in place of the shard's index.
pub const PLACEHOLDER: &str = "{shard}";

/// How a rerun file's name ends.
pub const RERUN: &str = ".rerun";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_a_number_or_a_batch_engines_index_variable() {
        let none = |_: &str| None;
        assert_eq!(
            Shard::parse("3/16", none).unwrap(),
            Shard {
                index: 3,
                count: 16
            }
        );
        let env = |name: &str| (name == "JOB_COMPLETION_INDEX").then(|| "7".to_string());
        assert_eq!(
            Shard::parse("JOB_COMPLETION_INDEX/16", env).unwrap().index,
            7
        );
        assert_eq!(
            Shard::parse("$JOB_COMPLETION_INDEX/16", env).unwrap().index,
            7
        );
        let err = Shard::parse("SLURM_ARRAY_TASK_ID/4", none).unwrap_err();
        assert!(format!("{err:#}").contains("SLURM_ARRAY_TASK_ID is not set"));
        assert!(Shard::parse("16/16", none).is_err());
        assert!(Shard::parse("1/0", none).is_err());
        assert!(Shard::parse("1", none).is_err());
        let shard = Shard::parse("1/3", none).unwrap();
        let taken: Vec<u64> = (0..9).filter(|&i| shard.takes(i)).collect();
        assert_eq!(taken, [1, 4, 7]);
        assert_eq!(shard.suffix(), ".shard1of3");
        assert_eq!(Shard::WHOLE.suffix(), "");
    }

    #[test]
    fn a_file_names_the_shard_that_wrote_it() {
        let shard = Shard { index: 2, count: 4 };
        assert_eq!(shard.rerun_file_name(), "shard2of4.rerun");
        assert_eq!(Shard::of_file("shard2of4.rerun"), Some(shard));
        let result = format!("v0000.s{:020}{}.json", 7, shard.suffix());
        assert_eq!(Shard::of_file(&result), Some(shard));
        assert_eq!(
            Shard::of_file("v0000.s00000000000000000007.json"),
            Some(Shard::WHOLE)
        );
        assert_eq!(Shard::of_file("shard4of4.rerun"), None);
        assert_eq!(Shard::of_file("notes.txt"), None);
        assert_eq!(
            shard.rerun_command("run.sh --shards 4 --only {shard}; echo {shard}"),
            "run.sh --shards 4 --only 2; echo 2"
        );
    }
}
