//! The `spool-relay` command line: its flags, and running a relay with them (the
//! upstream store, the spool, its drainer and uploader, the metrics endpoint, the
//! server) until SIGTERM or Ctrl-C.
//!
//! Promises: the first log line (`spool-relay listening addr=... metrics=...`) is
//! written once both listeners are bound, so a script can read the ports; on
//! SIGTERM or Ctrl-C it stops accepting, finishes requests in flight (for at most
//! `--shutdown-grace`), then stops the drainer between entries and exits 0.
//! Whatever the spool still holds is delivered by the next run on the same
//! directory (or by `spool drain`).
//!
//! Who may write (`docs/relay.md`, "Who can write through the relay"): on a
//! loopback `--listen`, local clients naming the relay by a loopback name; a
//! non-loopback `--listen` is refused at startup unless a token is configured
//! (`--token-file PATH` or `SPOOL_RELAY_TOKEN`, never a flag: `ps` shows every
//! process's arguments to every user). Browsers are refused always.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use bytesize::ByteSize;
use clap::Parser;
use spool::metrics::EndpointConfig;
use spool::{
    BackoffConfig, Drainer, DrainerConfig, Remote, Spool, SpoolConfig, SystemClock, Uploader,
    UploaderConfig,
};
use tokio::net::TcpListener;

use crate::auth::{Access, METRICS_TOKEN_ENV, TOKEN_ENV, Token};
use crate::handoff;
use crate::passthrough::PassThrough;
use crate::relay::{Relay, RelayConfig};
use crate::server::{DEFAULT_MAX_CONNECTIONS, ServerConfig};

/// Flags of `spool-relay`. The field docs are clap's help text.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The spool directory (created if missing, with its parents; one process per
    /// directory).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Where uploads go: gs://BUCKET (Cloud Storage with the standard credential
    /// chain, or an emulator: --endpoint / STORAGE_EMULATOR_HOST), file:///PATH or
    /// memory://.
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Address to serve the upload API on (loopback by default; port 0 picks one).
    /// Any other address needs a token (--token-file or SPOOL_RELAY_TOKEN).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4443")]
    pub listen: SocketAddr,
    /// A file holding the token every request must carry as `Authorization: Bearer
    /// TOKEN` (at least 24 printable characters; `openssl rand -hex 32`). Or set
    /// SPOOL_RELAY_TOKEN. Required with a non-loopback --listen.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Not taken: a token on the command line is visible to every user (ps). Kept
    /// only to say so.
    #[arg(long, value_name = "TOKEN", hide = true)]
    pub token: Option<String>,
    /// Most connections served at once; more wait in the listen backlog until one
    /// closes.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Most reads served at once (requests passed through to the upstream, reads
    /// of spooled objects); one more is answered 503 with Retry-After, so that
    /// uploads always find a connection. Default: half of --max-connections.
    #[arg(long, value_name = "N")]
    pub max_reads: Option<usize>,
    /// A connection whose client sends nothing (midway through a body) or reads
    /// nothing (of an answer) for this long is closed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub body_timeout: Duration,
    /// Serve the spool's and the relay's metrics at GET /metrics, and the probes
    /// GET /healthz and GET /readyz, on this address. Any address but loopback needs
    /// a metrics token (--metrics-token-file or SPOOL_RELAY_METRICS_TOKEN).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// A file holding the token GET /metrics must carry as `Authorization: Bearer
    /// TOKEN` (the probes need none). Or set SPOOL_RELAY_METRICS_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub metrics_token_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM), for clients that speak only
    /// HTTPS (gsutil); needs --tls-key. Links and session URLs are then https.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A Cloud Storage emulator for a gs:// upstream (http://host:port). Default:
    /// STORAGE_EMULATOR_HOST when set.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The bucket clients write to. Required for file:// and memory:// upstreams;
    /// for gs://BUCKET it is BUCKET.
    #[arg(long, value_name = "NAME")]
    pub bucket: Option<String>,
    /// Most entries the spool holds.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_files: u64,
    /// Most bytes the spool holds (entry files: header, name and payload).
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub max_bytes: ByteSize,
    /// Largest object accepted (larger is 413). Every upload passes through the
    /// spool, so at most --max-bytes less 9,264 bytes (an entry's largest header);
    /// that is the default. Bodies stream to disk: this bounds disk, not memory.
    #[arg(long, value_name = "SIZE")]
    pub max_object_bytes: Option<ByteSize>,
    /// Bytes of uploads up to 8 MiB held in memory in all while they arrive and are
    /// tried upstream (they need no room in the spool unless the upstream fails
    /// them); past it, uploads are staged in the spool as they arrive. 0 stages all.
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    pub max_buffered_bytes: ByteSize,
    /// Resumable sessions open at once (one more is refused with 503).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_sessions: usize,
    /// Bytes all open resumable sessions may hold on disk beside the spool.
    #[arg(long, value_name = "SIZE", default_value = "8GiB")]
    pub max_session_bytes: ByteSize,
    /// How long a request passed through (a read, list, delete, patch, copy) waits
    /// for the upstream's answer to begin, and between two pieces of it: then 503
    /// (or the answer is cut off), so a hanging upstream holds no connection longer.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub upstream_timeout: Duration,
    /// How long a direct write upstream may take before the object is spooled.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub put_timeout: Duration,
    /// Drainer workers.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub workers: usize,
    /// Longest delay between a drainer worker's retries.
    #[arg(long, value_name = "DURATION", default_value = "64s", value_parser = humantime::parse_duration)]
    pub backoff_cap: Duration,
    /// Retry-After on a 503 (spool full).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub retry_after: Duration,
    /// How long requests in flight may take to finish after SIGTERM.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,
}

/// `spool-relay`'s command line.
#[derive(Debug, Parser)]
#[command(
    name = "spool-relay",
    version,
    about = "A local Cloud Storage upload endpoint backed by the spool"
)]
struct Cli {
    #[command(flatten)]
    args: Args,
    /// How log lines are written: `plain` (key=value text) or `json` (one object a
    /// line: `timestamp`, `level`, `target`, `fields` with the message and every
    /// field, and `span` with the request's `id`), for a log pipeline.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "plain")]
    log_format: LogFormat,
}

/// [`Cli::log_format`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Plain,
    Json,
}

/// The binary: parses the flags, logs to stdout (`RUST_LOG`, default `info`; in
/// `--log-format`), runs.
pub fn main() -> ExitCode {
    use std::io::IsTerminal as _;
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let log = tracing_subscriber::fmt().with_env_filter(filter);
    match cli.log_format {
        LogFormat::Plain => log.with_ansi(std::io::stdout().is_terminal()).init(),
        LogFormat::Json => log.json().with_span_list(false).init(),
    }
    // Before any thread starts: it reads and removes LISTEN_FDS.
    let result = handoff::inherited().and_then(|inherited| run(cli.args, inherited));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spool-relay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a relay in a new tokio runtime until SIGTERM or Ctrl-C, or until it has
/// handed its socket to a new process after SIGHUP (`handoff.rs`), on the socket
/// systemd or an old relay passed in when they did.
fn run(args: Args, inherited: handoff::Inherited) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let ended = runtime.block_on(async {
        // Before anything is bound or logged: a SIGTERM that follows the `listening`
        // line must find the handler installed (it was installed only when the
        // server first polled it, and a quick SIGTERM killed the process).
        let signals = Signals::install().context("cannot watch SIGTERM, SIGINT and SIGHUP")?;
        run_until(args, inherited, signals).await
    })?;
    // Every task ends with the runtime, and every handle on the spool with them:
    // its lock is free for the new relay.
    drop(runtime);
    match ended {
        Ended::Stopped => Ok(()),
        Ended::HandedOver { successor, socket } => finish_hand_over(successor, &socket),
    }
}

/// How a relay's run ended.
enum Ended {
    /// SIGTERM or SIGINT.
    Stopped,
    /// SIGHUP, and a new relay said it is prepared to take over: this one has
    /// stopped; `socket` is kept in case the new one fails.
    HandedOver {
        successor: handoff::Successor,
        socket: std::os::fd::OwnedFd,
    },
}

/// Waits for the new relay to say it listens; when it fails instead, starts this
/// relay's own binary again on `socket`, so the port is never left dark.
fn finish_hand_over(
    successor: handoff::Successor,
    socket: &std::os::fd::OwnedFd,
) -> anyhow::Result<()> {
    let pid = successor.pid();
    match successor.ready() {
        Ok(()) => {
            tracing::info!(target: "spool_relay", pid, "the new spool-relay listens; exiting");
            Ok(())
        }
        Err(why) => {
            tracing::error!(
                target: "spool_relay",
                pid,
                "SIGHUP: the new spool-relay failed after this one stopped: {why}; starting \
                 this one's binary again on the same socket"
            );
            Err(handoff::restart(socket))
        }
    }
}

/// Runs a relay until `signals` says stop, then shuts it down gracefully.
async fn run_until(
    args: Args,
    inherited: handoff::Inherited,
    mut signals: Signals,
) -> anyhow::Result<Ended> {
    let handoff::Inherited {
        listener: inherited,
        mut predecessor,
    } = inherited;
    let bucket = bucket(&args.upstream, args.bucket.as_deref())?;
    refuse_loop(&args)?;
    let metrics_token = args.metrics_token(std::env::var(METRICS_TOKEN_ENV).ok())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            warn_if_others_can_read(key, "the TLS key file (--tls-key)");
            Some(fake_gcs::tls::acceptor(cert, key)?)
        }
        _ => None,
    };
    let store = spool::connect::store_from_url(&args.upstream, args.endpoint.as_deref())?;
    let (listener, inherited) = handoff::listener(inherited, args.listen).await?;
    // Who may send requests is decided on the socket served, which systemd or an
    // old relay may have bound elsewhere than --listen says.
    let served = Served {
        addr: listener.local_addr()?,
        inherited,
    };
    let server_config = args.server_config(std::env::var(TOKEN_ENV).ok(), &bucket, served)?;
    let socket = handoff::keep(&listener)?;
    // Absolute first: the spool creates missing parents and syncs each one's parent,
    // and a relative path's last ancestor is the empty path.
    let dir = std::path::absolute(&args.dir)
        .with_context(|| format!("cannot resolve the spool directory {}", args.dir.display()))?;
    let lock_wait = match inherited {
        true => args.shutdown_grace + handoff::OPEN_WAIT,
        false => Duration::ZERO,
    };
    let drainer_config = args.drainer_config()?;
    // Everything that can fail but the spool has: the old relay may stop now.
    if let Some(predecessor) = &mut predecessor {
        predecessor.tell("prepared");
    }
    let spool = open_spool(&dir, args.spool_config(), lock_wait).await?;
    let remote = Remote::new(store.clone());
    let drainer = Drainer::start(spool.clone(), remote.clone(), drainer_config);
    let uploader_config = UploaderConfig {
        put_timeout: args.put_timeout,
        ..UploaderConfig::default()
    };
    let uploader = Uploader::new(spool.clone(), remote, uploader_config);
    let config = RelayConfig {
        pass_through: pass_through(&args, &bucket, &store),
        ..args.relay_config(bucket)
    };
    let pass_through = config.pass_through.to_string();
    let relay = Relay::new(config, uploader, Arc::new(SystemClock))?;
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let metrics = serve_metrics(&args, metrics_token, &relay, stopping.clone()).await?;
    tracing::info!(
        target: "spool_relay",
        addr = %listener.local_addr()?,
        scheme = if tls.is_some() { "https" } else { "http" },
        inherited,
        metrics = %metrics.as_ref().map_or("off".to_string(), |(addr, _)| addr.to_string()),
        upstream = %args.upstream,
        bucket = %relay.config().bucket,
        dir = %dir.display(),
        pending = spool.stats().files,
        token = server_config.access.requires_token(),
        pass_through = %pass_through,
        max_connections = server_config.max_connections,
        "spool-relay listening"
    );
    if let Some(mut predecessor) = predecessor.take() {
        predecessor.tell("ready");
    }
    let bucket_check = tokio::spawn(check_bucket(relay.clone()));
    relay.begin_learning();
    let (told, ended) = tokio::sync::oneshot::channel();
    let shutdown = async {
        let ended = match signals.until_stop_or_handed_over(&socket).await {
            Some(successor) => Ended::HandedOver { successor, socket },
            None => {
                // Closed with the listener: new connections are refused, unless
                // systemd holds the socket too.
                drop(socket);
                Ended::Stopped
            }
        };
        stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = told.send(ended);
    };
    crate::serve_with_tls(
        relay,
        listener,
        shutdown,
        args.shutdown_grace,
        server_config,
        tls,
    )
    .await?;
    drainer.shutdown().await;
    bucket_check.abort();
    if let Some((_, task)) = metrics {
        task.abort();
    }
    let left = spool.stats();
    tracing::info!(
        target: "spool_relay",
        pending = left.files,
        "spool-relay stopped; pending entries are delivered by the next run on this directory"
    );
    Ok(ended.await.unwrap_or(Ended::Stopped))
}

/// How often the upstream's bucket is asked for again while it is missing.
const BUCKET_RECHECK: Duration = Duration::from_secs(60);

/// Asks the upstream whether the relay's bucket exists, and tells the relay
/// (`/uploadz`, `spool_relay_refusing_uploads{reason="bucket_missing"}`): at start,
/// then every minute while it is missing (a bucket made later is seen). An
/// upstream that cannot be asked now is not a missing bucket.
async fn check_bucket(relay: Relay) {
    let bucket = relay.config().bucket.clone();
    loop {
        match relay.config().pass_through.bucket_exists(&bucket).await {
            Ok(true) => {
                relay.bucket_checked(None);
                return;
            }
            Ok(false) => {
                let why = format!(
                    "the upstream has no bucket {bucket} (checked with the relay's \
                     credentials): uploads to it fail; create it, or give --upstream the \
                     right one"
                );
                tracing::warn!(target: "spool_relay", "{why}");
                relay.bucket_checked(Some(why));
            }
            Err(e) => {
                tracing::info!(
                    target: "spool_relay",
                    "cannot ask the upstream whether the bucket {bucket} exists now: {e}"
                );
                return;
            }
        }
        tokio::time::sleep(BUCKET_RECHECK).await;
    }
}

/// Opens the spool in `dir`; while another process holds its lock, tries again
/// every 100 ms for up to `lock_wait` (a relay taking over from an old one waits
/// for it to finish and exit).
async fn open_spool(
    dir: &std::path::Path,
    config: SpoolConfig,
    lock_wait: Duration,
) -> anyhow::Result<Spool> {
    let deadline = tokio::time::Instant::now() + lock_wait;
    let mut told = false;
    loop {
        match Spool::open(dir, config.clone()).await {
            Err(spool::OpenError::Locked { .. }) if tokio::time::Instant::now() < deadline => {
                if !told {
                    tracing::info!(
                        target: "spool_relay",
                        dir = %dir.display(),
                        "waiting for the relay this one takes over from to release the spool"
                    );
                    told = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            opened => {
                return opened.with_context(|| format!("cannot open the spool {}", dir.display()));
            }
        }
    }
}

impl Args {
    /// Who may send requests on the socket `served` and how connections are
    /// bounded; `env_token` is SPOOL_RELAY_TOKEN's value. Refuses a socket that is
    /// not loopback without a token (whether `--listen` bound it or it was
    /// inherited), a token given twice, a `--token` flag, and a token too weak to
    /// keep.
    fn server_config(
        &self,
        env_token: Option<String>,
        bucket: &str,
        served: Served,
    ) -> anyhow::Result<ServerConfig> {
        if self.upstream_timeout.is_zero() {
            bail!("--upstream-timeout must be longer than 0");
        }
        if self.token.is_some() {
            bail!(
                "--token is not taken: a token on the command line is visible to every user \
                 of the host (ps, /proc/PID/cmdline). Put it in a file only the relay's user \
                 can read and pass --token-file PATH, or set {TOKEN_ENV} in the relay's \
                 environment"
            );
        }
        let from_file = match &self.token_file {
            Some(path) => Some((
                read_token_file(path)?,
                format!("--token-file {}", path.display()),
            )),
            None => None,
        };
        let from_env = env_token
            .filter(|t| !t.trim().is_empty())
            .map(|t| (t, TOKEN_ENV.to_string()));
        let token = match (from_file, from_env) {
            (Some(_), Some(_)) => bail!(
                "the token is given twice, by --token-file and by {TOKEN_ENV}: give it one way"
            ),
            (Some((text, from)), None) | (None, Some((text, from))) => {
                Some(Token::new(&text).map_err(|e| anyhow!("the token from {from}: {e}"))?)
            }
            (None, None) => None,
        };
        let loopback = served.addr.ip().is_loopback();
        if !loopback && token.is_none() {
            let socket = match served.inherited {
                false => format!("--listen {}", served.addr),
                true => format!(
                    "the socket passed in LISTEN_FDS (bound to {}, by systemd's .socket unit or \
                     the relay this one took over from)",
                    served.addr
                ),
            };
            bail!(
                "{socket} is not a loopback address, and no token is configured: anyone who \
                 can reach it could write into the bucket {bucket} through this relay. Give a \
                 token with --token-file PATH or {TOKEN_ENV} (clients then send \
                 Authorization: Bearer TOKEN; see docs/relay.md), or listen on 127.0.0.1"
            );
        }
        let mut access = Access::default();
        if loopback {
            access = access.loopback_hosts_only();
        }
        if let Some(token) = token {
            access = access.with_token(token);
        }
        let config = ServerConfig {
            access,
            body_timeout: self.body_timeout,
            max_connections: self.max_connections,
            max_reads: self.max_reads,
            ..ServerConfig::default()
        };
        config.validate()?;
        Ok(config)
    }

    /// The token GET /metrics must carry, from --metrics-token-file or
    /// SPOOL_RELAY_METRICS_TOKEN (`env_token`); refuses a non-loopback --metrics
    /// without one.
    fn metrics_token(&self, env_token: Option<String>) -> anyhow::Result<Option<Token>> {
        let from_file = match &self.metrics_token_file {
            Some(path) => Some(read_token_file(path)?),
            None => None,
        };
        let from_env = env_token.filter(|t| !t.trim().is_empty());
        let text = match (from_file, from_env) {
            (Some(_), Some(_)) => bail!(
                "the metrics token is given twice, by --metrics-token-file and by \
                 {METRICS_TOKEN_ENV}: give it one way"
            ),
            (Some(text), None) | (None, Some(text)) => Some(text),
            (None, None) => None,
        };
        let token = match text {
            Some(text) => Some(Token::new(&text).map_err(|e| anyhow!("the metrics token: {e}"))?),
            None => None,
        };
        if let Some(addr) = self.metrics
            && !addr.ip().is_loopback()
            && token.is_none()
        {
            bail!(
                "--metrics {addr} is not a loopback address, and no metrics token is \
                 configured: anyone who can reach it could read the relay's metrics. Give one \
                 with --metrics-token-file PATH or {METRICS_TOKEN_ENV} (Prometheus then sends \
                 Authorization: Bearer TOKEN; the probes /healthz and /readyz need none), or \
                 serve metrics on 127.0.0.1"
            );
        }
        Ok(token)
    }

    fn spool_config(&self) -> SpoolConfig {
        SpoolConfig {
            max_files: self.max_files,
            max_bytes: self.max_bytes.as_u64(),
            ..SpoolConfig::default()
        }
    }

    fn drainer_config(&self) -> anyhow::Result<DrainerConfig> {
        if self.workers == 0 {
            bail!("--workers must be at least 1");
        }
        Ok(DrainerConfig {
            workers: self.workers,
            backoff: BackoffConfig {
                cap: self.backoff_cap,
                ..BackoffConfig::default()
            },
            ..DrainerConfig::default()
        })
    }

    fn relay_config(&self, bucket: String) -> RelayConfig {
        // Sessions remember this: one opened for another store is not completed.
        let upstream = match &self.endpoint {
            Some(endpoint) => format!("{} at {endpoint}", self.upstream),
            None => self.upstream.clone(),
        };
        RelayConfig {
            upstream,
            max_object_bytes: self.max_object_bytes.map(|b| b.as_u64()),
            max_sessions: self.max_sessions,
            max_session_bytes: self.max_session_bytes.as_u64(),
            retry_after: self.retry_after,
            max_buffered_bytes: self.max_buffered_bytes.as_u64(),
            ..RelayConfig::new(bucket)
        }
    }
}

/// Where requests that are not uploads go: a `gs://` upstream's endpoint over
/// HTTP (an emulator's without credentials; Cloud Storage's with the bearer token
/// of the standard credential chain, or 501 naming why there is none), any other
/// upstream's store.
fn pass_through(
    args: &Args,
    bucket: &str,
    store: &Arc<dyn object_store::ObjectStore>,
) -> PassThrough {
    if !args.upstream.starts_with("gs://") {
        return PassThrough::store(store.clone());
    }
    let emulator = (args.endpoint.clone())
        .or_else(|| std::env::var(spool::connect::EMULATOR_ENV).ok())
        .filter(|e| !e.is_empty());
    let built = match emulator {
        Some(endpoint) => {
            let endpoint = match endpoint.contains("://") {
                true => endpoint,
                false => format!("http://{endpoint}"),
            };
            PassThrough::http_with_timeout(&endpoint, None, args.upstream_timeout)
        }
        None => {
            let gcs = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .build();
            match gcs {
                Ok(gcs) => {
                    let credentials = Some(gcs.credentials().clone());
                    let timeout = args.upstream_timeout;
                    PassThrough::http_with_timeout(CLOUD_STORAGE_ENDPOINT, credentials, timeout)
                }
                Err(e) => {
                    return PassThrough::unavailable(format!(
                        "it has no Cloud Storage credentials to read with ({e})"
                    ));
                }
            }
        }
    };
    built.unwrap_or_else(|e| PassThrough::unavailable(e.to_string()))
}

/// Cloud Storage's endpoint for both APIs.
const CLOUD_STORAGE_ENDPOINT: &str = "https://storage.googleapis.com";

/// The token in the file at `path`; warns when others than its owner may read it.
fn read_token_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    warn_if_others_can_read(path, "the token file");
    Ok(text)
}

/// Warns when a secret's file (`what`, at `path`) can be read by other users than
/// its owner.
fn warn_if_others_can_read(path: &std::path::Path, what: &str) {
    if let Some(mode) = others_can_read(path) {
        tracing::warn!(
            target: "spool_relay",
            file = %path.display(),
            mode = format!("{mode:o}"),
            "{what} can be read by other users; chmod 600 it"
        );
    }
}

/// The file's permission bits, when its group or others have any.
fn others_can_read(path: &std::path::Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The bucket clients must name: gs://BUCKET's, or `--bucket` for other stores.
fn bucket(upstream: &str, given: Option<&str>) -> anyhow::Result<String> {
    let from_url = upstream
        .strip_prefix("gs://")
        .map(|b| b.trim_end_matches('/'));
    match (from_url, given) {
        (Some(url), Some(given)) if url != given => {
            bail!("--bucket {given} differs from the upstream's bucket {url}")
        }
        (Some(url), _) => Ok(url.to_string()),
        (None, Some(given)) => Ok(given.to_string()),
        (None, None) => bail!(
            "--bucket NAME is required with the upstream {upstream}: clients name a bucket, \
             and only gs:// URLs carry one"
        ),
    }
}

/// Refuses an emulator endpoint that is the relay's own address (a host whose
/// `STORAGE_EMULATOR_HOST` points its services at the relay would otherwise make
/// the relay write to itself).
fn refuse_loop(args: &Args) -> anyhow::Result<()> {
    if !args.upstream.starts_with("gs://") || args.listen.port() == 0 {
        return Ok(());
    }
    let from_env = std::env::var(spool::connect::EMULATOR_ENV).ok();
    let Some(endpoint) = args.endpoint.clone().or(from_env).filter(|e| !e.is_empty()) else {
        return Ok(());
    };
    if points_at(&endpoint, args.listen) {
        bail!(
            "the upstream endpoint {endpoint} is the relay's own address {}: give the \
             upstream with --endpoint (STORAGE_EMULATOR_HOST is read when it is absent)",
            args.listen
        );
    }
    Ok(())
}

/// Whether `endpoint` (`http://host:port` or `host:port`) resolves to `listen`.
fn points_at(endpoint: &str, listen: SocketAddr) -> bool {
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let Ok(addrs) = authority.to_socket_addrs() else {
        return false;
    };
    addrs.into_iter().any(|addr| {
        addr.port() == listen.port() && (addr.ip() == listen.ip() || listen.ip().is_unspecified())
    })
}

/// The socket the relay serves: its address, and whether it was inherited
/// (`LISTEN_FDS`) rather than bound from `--listen`.
#[derive(Debug, Clone, Copy)]
struct Served {
    addr: SocketAddr,
    inherited: bool,
}

type MetricsTask = (SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>);

/// Serves the spool's and the relay's series and the probes at `--metrics`, if
/// given; `/readyz` is 503 once `stopping` is set.
async fn serve_metrics(
    args: &Args,
    token: Option<Token>,
    relay: &Relay,
    stopping: Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<Option<MetricsTask>> {
    let Some(addr) = args.metrics else {
        return Ok(None);
    };
    let mut registry = prometheus_client::registry::Registry::default();
    relay.spool().register_metrics(&mut registry);
    relay.register_metrics(&mut registry);
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    // Readiness is the relay's serving, never the spool's state: in a sidecar an
    // unready relay takes the whole Pod out of its Services (in a regional outage,
    // every replica at once) and makes it the first deleted on scale-down, spool
    // and all. Whether uploads are taken is /uploadz's, and the metrics'.
    let ready = move || match stopping.load(std::sync::atomic::Ordering::SeqCst) {
        true => Err("spool-relay is shutting down".to_string()),
        false => Ok(()),
    };
    let refusing = relay.clone();
    let uploads = move || {
        let now = refusing.refusing_uploads();
        match now.is_empty() {
            true => Ok(()),
            false => Err((now.into_iter().map(|r| r.message))
                .collect::<Vec<_>>()
                .join("; ")),
        }
    };
    let config = EndpointConfig {
        token: token.map(|t| t.secret().into()),
        ready: Some(Arc::new(ready)),
        uploads: Some(Arc::new(uploads)),
        ..EndpointConfig::for_addr(addr)
    };
    let task = tokio::spawn(spool::metrics::serve_with(
        listener,
        Arc::new(registry),
        config,
    ));
    Ok(Some((bound, task)))
}

/// What the process is told: SIGTERM or SIGINT (Ctrl-C) stop it; SIGHUP hands its
/// listening socket to a new process (`handoff.rs`), then stops it. The handlers are
/// installed when this is built, not when it is first polled.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    #[cfg(unix)]
    pub fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits for SIGTERM or SIGINT (`None`), or for a SIGHUP whose new relay says
    /// it is prepared to take over (its successor). A new relay that cannot be
    /// started, exits, or says nothing in time is logged, and this one serves on.
    #[cfg(unix)]
    async fn until_stop_or_handed_over(
        &mut self,
        socket: &std::os::fd::OwnedFd,
    ) -> Option<handoff::Successor> {
        loop {
            tokio::select! {
                _ = self.term.recv() => return None,
                _ = self.interrupt.recv() => return None,
                _ = self.hangup.recv() => {
                    if let Some(successor) = self.hand_over(socket).await {
                        return Some(successor);
                    }
                }
            }
        }
    }

    /// Starts a new relay on `socket` and waits for it to be prepared, serving on
    /// meanwhile; `None` when it will not take over (logged). Signals that come
    /// meanwhile wait until it is settled.
    #[cfg(unix)]
    async fn hand_over(&mut self, socket: &std::os::fd::OwnedFd) -> Option<handoff::Successor> {
        let started = match handoff::hand_over(socket) {
            Ok(started) => started,
            Err(e) => {
                tracing::error!(
                    target: "spool_relay",
                    "SIGHUP: cannot hand the listening socket to a new spool-relay, serving \
                     on: cannot start it: {e:#}"
                );
                return None;
            }
        };
        let pid = started.pid();
        tracing::info!(
            target: "spool_relay",
            pid,
            "SIGHUP: started a new spool-relay on the listening socket; serving until it is \
             prepared to take over"
        );
        match started.prepared().await {
            Ok(successor) => {
                tracing::info!(
                    target: "spool_relay",
                    pid,
                    "SIGHUP: handed the listening socket to a new spool-relay, prepared to take \
                     over; finishing the requests in flight and stopping"
                );
                Some(successor)
            }
            Err(why) => {
                tracing::error!(
                    target: "spool_relay",
                    pid,
                    "SIGHUP: cannot hand the listening socket to a new spool-relay, serving \
                     on: it will not take over: {why}"
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        let argv = ["spool-relay", "--dir", "/tmp/s", "--upstream", "gs://bkt"];
        let argv = argv.iter().chain(flags.iter()).copied();
        Cli::try_parse_from(argv).map(|cli| cli.args)
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.listen, "127.0.0.1:4443".parse().unwrap());
        assert_eq!(args.max_bytes.as_u64(), 1 << 30);
        let relay = args.relay_config("bkt".into());
        assert_eq!(relay, RelayConfig::new("bkt"));
        let drainer = args.drainer_config().unwrap();
        assert_eq!(drainer.backoff, BackoffConfig::default());
        let args = parse(&["--max-object-bytes", "1 MiB", "--backoff-cap", "1s"]).unwrap();
        assert_eq!(
            args.relay_config("bkt".into()).max_object_bytes,
            Some(1 << 20)
        );
        assert_eq!(
            args.drainer_config().unwrap().backoff.cap,
            Duration::from_secs(1)
        );
    }

    #[test]
    fn zero_limits_are_refused_by_name_not_raised_to_one() {
        for (flags, named) in [
            (&["--workers", "0"][..], "--workers"),
            (&["--max-connections", "0"], "--max-connections"),
            (&["--body-timeout", "0s"], "--body-timeout"),
            (&["--upstream-timeout", "0s"], "--upstream-timeout"),
            (&["--max-reads", "0"], "--max-reads"),
            (
                &["--max-connections", "4", "--max-reads", "5"],
                "--max-reads",
            ),
        ] {
            let args = parse(flags).unwrap();
            let e = match args.drainer_config() {
                Err(e) => e.to_string(),
                Ok(_) => (args.server_config(None, "bkt", bound(&args)))
                    .unwrap_err()
                    .to_string(),
            };
            assert!(e.contains(named), "{flags:?}: {e}");
        }
        let config = parse(&["--max-sessions", "0"])
            .unwrap()
            .relay_config("bkt".into());
        let e = config
            .validate(&SpoolConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-sessions"), "{e}");
    }

    #[test]
    fn an_object_limit_over_what_the_spool_holds_is_refused_and_the_default_fits() {
        // Found by review (H3): --max-object-bytes defaulted to 5 GiB while every
        // upload is staged through a spool of --max-bytes 1 GiB, so a resumable
        // upload of 1-5 GiB was taken chunk by chunk and refused at the end.
        let args = parse(&["--max-object-bytes", "5GiB"]).unwrap();
        let e = args
            .relay_config("bkt".into())
            .validate(&args.spool_config());
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains("--max-bytes") && e.contains("--max-object-bytes"),
            "{e}"
        );
        let args = parse(&[]).unwrap();
        let largest = args
            .relay_config("bkt".into())
            .validate(&args.spool_config());
        assert_eq!(largest, Ok((1 << 30) - crate::MAX_ENTRY_HEAD_BYTES));
        let args = parse(&["--max-bytes", "8GiB", "--max-object-bytes", "5GiB"]).unwrap();
        let fits = args
            .relay_config("bkt".into())
            .validate(&args.spool_config());
        assert_eq!(fits, Ok(5 << 30));
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    /// The socket `--listen` binds.
    fn bound(args: &Args) -> Served {
        Served {
            addr: args.listen,
            inherited: false,
        }
    }

    #[test]
    fn the_token_rule_follows_the_socket_served_not_listen() {
        // Found by review (52/4): a LISTEN_FDS socket on 0.0.0.0 served uploads from
        // a LAN address with no token, because the rule read --listen (loopback by
        // default), not the socket.
        let args = parse(&[]).unwrap();
        let inherited = Served {
            addr: "0.0.0.0:4443".parse().unwrap(),
            inherited: true,
        };
        let e = args.server_config(None, "bkt", inherited).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("the socket passed in LISTEN_FDS (bound to 0.0.0.0:4443"),
            "{e}"
        );
        let config = args.server_config(Some(TOKEN.into()), "bkt", inherited);
        let config = config.unwrap();
        assert!(config.access.requires_token());
        // A loopback socket handed over keeps the Host check, whatever --listen.
        let lan = parse(&["--listen", "10.1.2.3:4443"]).unwrap();
        let loopback = Served {
            addr: "127.0.0.1:4443".parse().unwrap(),
            inherited: true,
        };
        let config = lan.server_config(None, "bkt", loopback).unwrap();
        let mut evil = http::HeaderMap::new();
        evil.insert("host", "rebound.example".parse().unwrap());
        assert!(config.access.check(&evil).is_err());
    }

    #[test]
    fn a_non_loopback_listen_without_a_token_is_refused_saying_what_to_do() {
        let args = parse(&["--listen", "0.0.0.0:4443"]).unwrap();
        let e = (args.server_config(None, "bkt", bound(&args)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--listen 0.0.0.0:4443 is not a loopback address"),
            "{e}"
        );
        assert!(e.contains("--token-file PATH or SPOOL_RELAY_TOKEN"), "{e}");
        let config = (args.server_config(Some(TOKEN.into()), "bkt", bound(&args))).unwrap();
        assert!(config.access.requires_token());
        // A loopback relay needs no token, and checks Host names.
        let args = parse(&[]).unwrap();
        let config = args.server_config(None, "bkt", bound(&args)).unwrap();
        assert!(!config.access.requires_token());
        let mut evil = http::HeaderMap::new();
        evil.insert("host", "rebound.example".parse().unwrap());
        assert!(config.access.check(&evil).is_err());
        assert_eq!(config.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(config.body_timeout, crate::DEFAULT_BODY_TIMEOUT);
    }

    #[test]
    fn a_token_comes_from_a_file_or_the_environment_never_a_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
        let path = file.to_str().unwrap();
        let listen = ["--listen", "10.1.2.3:4443"];
        let args = parse(&[&listen[..], &["--token-file", path]].concat()).unwrap();
        let config = args.server_config(None, "bkt", bound(&args)).unwrap();
        assert!(config.access.requires_token());
        let e = (args.server_config(Some(TOKEN.into()), "bkt", bound(&args))).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let args = parse(&["--token", TOKEN]).unwrap();
        let e = args.server_config(None, "bkt", bound(&args)).unwrap_err();
        assert!(e.to_string().contains("visible to every user"), "{e}");
        assert!(!e.to_string().contains(TOKEN), "{e}");
        let args = parse(&listen).unwrap();
        let e = (args.server_config(Some("weak".into()), "bkt", bound(&args))).unwrap_err();
        assert!(
            e.to_string()
                .contains("SPOOL_RELAY_TOKEN: the token has 4 bytes"),
            "{e}"
        );
        let missing = dir.path().join("nope");
        let args = parse(&["--token-file", missing.to_str().unwrap()]).unwrap();
        let e = format!(
            "{:#}",
            args.server_config(None, "bkt", bound(&args)).unwrap_err()
        );
        assert!(e.contains("cannot read the token file"), "{e}");
    }

    #[test]
    fn a_secret_file_others_can_read_is_told_apart() {
        // Found by review (52/18): a world-readable --tls-key got no warning (a
        // token file did).
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(&key, "secret").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(others_can_read(&key), Some(0o644));
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(others_can_read(&key), None);
    }

    #[test]
    fn the_bucket_comes_from_the_url_or_the_flag() {
        assert_eq!(bucket("gs://bkt/", None).unwrap(), "bkt");
        assert_eq!(bucket("gs://bkt", Some("bkt")).unwrap(), "bkt");
        assert!(bucket("gs://bkt", Some("other")).is_err());
        assert_eq!(bucket("memory://", Some("b")).unwrap(), "b");
        let e = bucket("file:///tmp/x", None).unwrap_err().to_string();
        assert!(e.contains("--bucket NAME is required"), "{e}");
    }

    #[test]
    fn an_endpoint_that_is_the_relay_itself_is_refused() {
        let listen: SocketAddr = "127.0.0.1:4443".parse().unwrap();
        assert!(points_at("http://127.0.0.1:4443", listen));
        assert!(points_at("127.0.0.1:4443", listen));
        assert!(!points_at("http://127.0.0.1:4444", listen));
        let any: SocketAddr = "0.0.0.0:4443".parse().unwrap();
        assert!(points_at("http://127.0.0.1:4443/", any));
        let args = parse(&["--endpoint", "http://127.0.0.1:4443"]).unwrap();
        assert!(refuse_loop(&args).is_err());
    }
}
