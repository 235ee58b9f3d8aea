//! The control protocol: one command a line, one answer a line, each answer sent
//! only once the command has taken effect (a `power-loss` is answered once the mount
//! serves the durable state). The binary serves it on a Unix socket (`--control
//! PATH`); [`execute`] is the whole protocol, for any other transport.
//!
//! | command | answer |
//! |---|---|
//! | `power-loss` | `ok {JSON}`: what this power loss produced ([`PowerLoss`]), decided by the mount's seeded RNG |
//! | `power-loss SEED` | the same, decided by `SEED` alone |
//! | `fault KIND ERRNO PROBABILITY` | `ok`: operations of `KIND` fail with `ERRNO` with that probability from now on; `KIND` is one of `open read write fsync fsyncdir create mkdir rename unlink rmdir readdir setattr`, or `all`; `ERRNO` one of `EIO ENOSPC EDQUOT EROFS`; probability 0 removes the rule |
//! | `fault clear` | `ok`: no more faults |
//! | `stats` | `ok {JSON}`: counts over the mount's life ([`Stats`]) |
//! | `help` | `ok ` and the commands |
//!
//! Anything else, or a command that fails, is answered `error MESSAGE`.
//!
//! [`PowerLoss`]: crate::PowerLoss
//! [`Stats`]: crate::Stats

use crate::Mount;
use crate::faults::{Errno, FaultError, OpKind};

const HELP: &str =
    "commands: power-loss [SEED] | fault KIND ERRNO PROBABILITY | fault clear | stats | help";

/// Runs one command line on `mount`; returns the answer line (no newline).
pub fn execute(mount: &Mount, line: &str) -> String {
    match run(mount, line) {
        Ok(answer) if answer.is_empty() => "ok".to_string(),
        Ok(answer) => format!("ok {answer}"),
        Err(message) => format!("error {message}"),
    }
}

fn run(mount: &Mount, line: &str) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["power-loss"] => json(&mount.power_loss().map_err(|e| e.to_string())?),
        ["power-loss", seed] => {
            let seed: u64 = seed
                .parse()
                .map_err(|_| format!("seed {seed:?} is not a number"))?;
            json(
                &mount
                    .power_loss_with_seed(seed)
                    .map_err(|e| e.to_string())?,
            )
        }
        ["fault", "clear"] => {
            mount.clear_faults();
            Ok(String::new())
        }
        ["fault", kind, errno, probability] => {
            set_fault(mount, kind, errno, probability).map_err(|e| e.to_string())?;
            Ok(String::new())
        }
        ["stats"] => json(&mount.stats()),
        ["help"] => Ok(HELP.to_string()),
        _ => Err(format!("unknown command {line:?}; {HELP}")),
    }
}

fn set_fault(
    mount: &Mount,
    kind: &str,
    errno: &str,
    probability: &str,
) -> Result<(), crate::Error> {
    let errno: Errno = errno.parse()?;
    let probability: f64 = probability
        .parse()
        .map_err(|_| FaultError::BadProbability(f64::NAN))?;
    let kinds = match kind {
        "all" => OpKind::ALL.to_vec(),
        _ => vec![kind.parse()?],
    };
    for kind in kinds {
        mount.set_fault(kind, errno, probability)?;
    }
    Ok(())
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| e.to_string())
}
