//! The writers: Node and Python processes running clients/torture/writer.js and
//! writer.py, and `object_store` tasks in this process. Each uploads one object at a
//! time until told to stop, and logs a `begin` line before each upload and an `end`
//! line with the answer after it, in its own `<logs>/<writer>.jsonl`, and a
//! `refused` line for each connection refused (ECONNREFUSED) as it happens (the
//! official clients retry a refused request themselves, so an upload's end would
//! not show it).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path as StorePath;
use object_store::{Attribute, Attributes, ObjectStore, PutMode, PutOptions, PutPayload};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::args::{BUCKET, Paths, WriterArgs, WriterKind};
use crate::{clock, procs, workload};

/// How long the `object_store` writer waits after an error before its next upload.
const ERROR_PAUSE: Duration = Duration::from_millis(100);

/// A running writer.
#[derive(Debug)]
pub enum Writer {
    /// A Node or Python process; closing its stdin tells it to stop.
    Script {
        name: String,
        child: Box<Child>,
        stdin: Option<ChildStdin>,
    },
    /// An `object_store` task; the flag tells it to stop.
    Task {
        name: String,
        stop: watch::Sender<bool>,
        task: JoinHandle<anyhow::Result<()>>,
    },
}

/// What every writer is given.
#[derive(Debug, Clone)]
pub struct Setup {
    pub paths: Paths,
    pub logs: PathBuf,
    pub relay_url: String,
    pub max_bytes: u64,
    pub seed: u64,
}

/// A seed per writer, from the run's seed and the writer's index.
fn writer_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Starts writer `index` of `kind`.
pub fn start(setup: &Setup, kind: WriterKind, index: usize) -> anyhow::Result<Writer> {
    let name = format!("{}-{index}", kind.label());
    let seed = writer_seed(setup.seed, (kind as u64) << 32 | index as u64);
    let log = setup.logs.join(format!("{name}.jsonl"));
    let (program, script) = match kind {
        WriterKind::Node => (&setup.paths.node, &setup.paths.node_writer),
        WriterKind::Python => (&setup.paths.python, &setup.paths.python_writer),
        WriterKind::ObjectStore => {
            let store =
                spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(&setup.relay_url))?;
            let (stop, stopped) = watch::channel(false);
            let (writer, max_bytes) = (name.clone(), setup.max_bytes);
            let task = tokio::spawn(object_store_loop(
                store, writer, seed, max_bytes, log, stopped,
            ));
            return Ok(Writer::Task { name, stop, task });
        }
    };
    let output = std::fs::File::create(setup.logs.join(format!("{name}.out")))?;
    let mut command = Command::new(program);
    command
        .arg(script)
        .args(["--endpoint", &setup.relay_url, "--bucket", BUCKET])
        .arg("--log")
        .arg(&log)
        .args(["--writer", &name])
        // writer.js seeds a 32-bit generator.
        .args(["--seed", &(seed & 0xffff_ffff).to_string()])
        .args(["--max-bytes", &setup.max_bytes.to_string()])
        .env_remove("STORAGE_EMULATOR_HOST")
        .stdin(Stdio::piped())
        .stdout(output.try_clone()?)
        .stderr(output)
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|e| {
        anyhow::anyhow!(
            "cannot start {} {}: {e}",
            program.display(),
            script.display()
        )
    })?;
    let stdin = child.stdin.take();
    let child = Box::new(child);
    Ok(Writer::Script { name, child, stdin })
}

/// Every writer `load` asks for: `per_kind` of each kind.
pub fn start_all(setup: &Setup, load: &WriterArgs) -> anyhow::Result<Vec<Writer>> {
    let mut writers = Vec::new();
    for &kind in &load.writers {
        for index in 0..load.per_kind {
            writers.push(start(setup, kind, index)?);
        }
    }
    Ok(writers)
}

/// `node, python, object-store x2`.
pub fn describe(load: &WriterArgs) -> String {
    let kinds: Vec<&str> = load.writers.iter().map(|k| k.label()).collect();
    format!("{} x{}", kinds.join(", "), load.per_kind)
}

impl Writer {
    pub fn name(&self) -> &str {
        match self {
            Writer::Script { name, .. } | Writer::Task { name, .. } => name,
        }
    }

    /// Tells it to stop after the upload in progress.
    pub fn tell_stop(&mut self) {
        match self {
            Writer::Script { stdin, .. } => drop(stdin.take()),
            Writer::Task { stop, .. } => {
                let _ = stop.send(true);
            }
        }
    }

    /// Waits until it has stopped, at most until `deadline`; kills it after that.
    /// Whether it stopped by itself, cleanly.
    pub async fn finish(self, deadline: Instant) -> anyhow::Result<bool> {
        match self {
            Writer::Script { mut child, .. } => {
                match tokio::time::timeout_at(deadline, child.wait()).await {
                    Ok(status) => Ok(status?.success()),
                    Err(_) => {
                        procs::kill_now(&mut child).await?;
                        Ok(false)
                    }
                }
            }
            Writer::Task { task, .. } => {
                let abort = task.abort_handle();
                match tokio::time::timeout_at(deadline, task).await {
                    Ok(result) => Ok(result.is_ok_and(|r| r.is_ok())),
                    Err(_) => {
                        abort.abort();
                        Ok(false)
                    }
                }
            }
        }
    }

    /// Whether a process writer has exited already (it should run until told).
    pub fn exited(&mut self) -> Option<String> {
        match self {
            Writer::Script { child, .. } => match child.try_wait() {
                Ok(Some(status)) => Some(status.to_string()),
                _ => None,
            },
            Writer::Task { task, .. } => task.is_finished().then(|| "ended".to_string()),
        }
    }
}

/// The `object_store` writer: create-if-absent XML `PUT`s with attributes through
/// the production GCS client (its retries off), one at a time, until `stop`.
async fn object_store_loop(
    store: Arc<dyn ObjectStore>,
    writer: String,
    seed: u64,
    max_bytes: u64,
    log: PathBuf,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seq = 0;
    while !*stop.borrow() {
        let upload = workload::upload(&mut rng, &writer, seq, max_bytes);
        let (md5, crc32c) = workload::digests(&upload.data);
        let common = json!({"writer": writer, "seq": seq, "name": upload.name});
        let mut begin = common.clone();
        begin["ev"] = json!("begin");
        begin["t"] = json!(clock::unix_ms());
        begin["kind"] = json!("xml");
        begin["size"] = json!(upload.data.len());
        begin["md5"] = json!(md5);
        begin["crc32c"] = json!(crc32c);
        begin["contentType"] = json!(upload.content_type);
        begin["cacheControl"] = json!(upload.cache_control);
        begin["metadata"] = json!(upload.metadata);
        writeln!(file, "{begin}")?;
        let started = Instant::now();
        let result = put(&*store, &upload).await;
        let mut end = common;
        end["ev"] = json!("end");
        end["t"] = json!(clock::unix_ms());
        end["ms"] = json!(started.elapsed().as_millis() as u64);
        match result {
            Ok(()) => end["answer"] = json!("ok"),
            Err(failure) => {
                if failure.refused {
                    // As the script writers log each refused connection: this
                    // client, its retries off, tried one connection.
                    let mut refused = json!({"ev": "refused", "writer": writer, "seq": seq});
                    refused["t"] = json!(clock::unix_ms());
                    refused["error"] = json!(failure.text);
                    writeln!(file, "{refused}")?;
                }
                end["answer"] = json!("error");
                end["error"] = json!(failure.text);
            }
        }
        writeln!(file, "{end}")?;
        seq += 1;
        if end["answer"] != "ok" {
            // An application would not retry at once either (the relay may be
            // restarting): a pause keeps this writer from spinning on refusals.
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
    Ok(())
}

/// Why an `object_store` write failed.
#[derive(Debug)]
struct Failure {
    text: String,
    /// Its connection was refused (ECONNREFUSED).
    refused: bool,
}

impl From<String> for Failure {
    fn from(text: String) -> Self {
        Failure {
            text,
            refused: false,
        }
    }
}

/// One create-if-absent write; why it failed otherwise.
async fn put(store: &dyn ObjectStore, upload: &workload::Upload) -> Result<(), Failure> {
    let path = StorePath::parse(&upload.name).map_err(|e| e.to_string())?;
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::ContentType, upload.content_type.clone().into());
    if let Some(cache) = &upload.cache_control {
        attributes.insert(Attribute::CacheControl, cache.clone().into());
    }
    for (key, value) in &upload.metadata {
        attributes.insert(
            Attribute::Metadata(key.clone().into()),
            value.clone().into(),
        );
    }
    let options = PutOptions {
        mode: PutMode::Create,
        attributes,
        ..PutOptions::default()
    };
    // A generous bound: the client's own timeout is per request; this one keeps a
    // writer from hanging on a connection nobody answers.
    let write = store.put_opts(&path, PutPayload::from(upload.data.clone()), options);
    match tokio::time::timeout(Duration::from_secs(120), write).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Failure {
            refused: refused(&e),
            text: e.to_string(),
        }),
        Err(_) => Err("no answer within 120 s".to_string().into()),
    }
}

/// Whether `e` (or an error under it) is a refused connection.
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(err) = source {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        source = err.source();
    }
    // Wrapped where the chain is not exposed: the text still says so.
    let text = format!("{e:?}");
    text.contains("ConnectionRefused") || text.contains("Connection refused")
}

/// The log files of every writer in `logs`.
pub fn logs(logs: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(logs)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}

/// The end of the load: the relay started if a deploy or a crash left it stopped,
/// every writer told to stop and given `settle_secs` to finish its upload in
/// progress. What failed.
pub async fn finish_through(
    relay: &mut crate::relay::Relay,
    mut writers: Vec<Writer>,
    settle_secs: u64,
) -> Vec<String> {
    let mut failures = Vec::new();
    if !relay.running()
        && let Err(e) = relay.start("for the end").await
    {
        failures.push(format!("the relay did not start for the end: {e:#}"));
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(settle_secs);
    for writer in &mut writers {
        writer.tell_stop();
    }
    for writer in writers {
        let name = writer.name().to_string();
        match writer.finish(deadline).await {
            Ok(true) => {}
            Ok(false) => failures.push(format!(
                "writer {name} did not finish its last upload within {settle_secs}s, or failed"
            )),
            Err(e) => failures.push(format!("writer {name}: {e:#}")),
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_get_distinct_seeds() {
        let seeds: std::collections::BTreeSet<u64> = (0..3)
            .flat_map(|kind| (0..8).map(move |i| writer_seed(1, kind << 32 | i)))
            .collect();
        assert_eq!(seeds.len(), 24);
        assert_ne!(writer_seed(1, 0), writer_seed(2, 0));
    }
}
