//! The command line: `torture --power-losses N [--seed S] [--minutes M] [--work DIR]
//! [--writers node,python,object-store]` and the paths to what it runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, ValueEnum};

/// The bucket every writer writes to.
pub const BUCKET: &str = "bkt";

/// A kind of writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum WriterKind {
    /// `@google-cloud/storage` (clients/torture/writer.js).
    Node,
    /// `google-cloud-storage` (clients/torture/writer.py).
    Python,
    /// `object_store`'s GCS client in this process: XML `PUT`, create-if-absent.
    ObjectStore,
}

impl WriterKind {
    /// The name writers of this kind log under (`node-0`, `object-store-1`).
    pub fn label(self) -> &'static str {
        match self {
            WriterKind::Node => "node",
            WriterKind::Python => "python",
            WriterKind::ObjectStore => "object-store",
        }
    }
}

/// `torture`'s flags. See docs/torture.md.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "torture",
    about = "A torture run of the real binaries: fake-gcs, spool-relay on crashfs, official \
             clients; SIGKILL and power loss at random moments; every acknowledged write \
             checked against the bucket",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
pub struct Args {
    /// Real file-system faults instead (docs/faults.md).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Stop the chaos after this many power losses.
    #[arg(long, value_name = "N", required = true)]
    pub power_losses: Option<u64>,
    /// Seed of the schedule (events, outages, power losses, writers' workloads).
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Stop the chaos after this many minutes, whatever the power losses so far.
    #[arg(long, value_name = "M")]
    pub minutes: Option<f64>,
    /// Working directory: crashfs's backing directory and mount point, the logs.
    /// Emptied first. Default: <target>/torture.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    #[command(flatten)]
    pub load: WriterArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// An extra flag for spool-relay (repeatable), e.g. --relay-arg=--workers=8.
    #[arg(long = "relay-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub relay_args: Vec<String>,
    /// The relay's --shutdown-grace: a SIGTERM deploy must end within it.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub shutdown_grace_secs: u64,
    /// How long the end may wait for writers to finish and for the spool to drain.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub settle_secs: u64,
}

/// The writers: what each run starts through the relay.
#[derive(Debug, Clone, clap::Args)]
pub struct WriterArgs {
    /// Kinds of writers to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "node,python,object-store"
    )]
    pub writers: Vec<WriterKind>,
    /// Writers of each kind, each writing one object at a time.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub per_kind: usize,
    /// Largest object written, in bytes (sizes are log-uniform from 1 byte).
    #[arg(long, value_name = "BYTES", default_value_t = 6 << 20)]
    pub max_bytes: u64,
}

/// Where the binaries and the clients are.
#[derive(Debug, Clone, clap::Args)]
pub struct ToolArgs {
    /// Where spool-relay, fake-gcs and spool are. Default: this binary's directory.
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The repository's clients/ directory (torture/writer.js, torture/writer.py,
    /// node/node_modules).
    #[arg(long, value_name = "DIR")]
    pub clients: Option<PathBuf>,
    /// Node.
    #[arg(long, value_name = "PATH", default_value = "node")]
    pub node: PathBuf,
    /// A Python with clients/python/requirements.txt installed. Default: the virtual
    /// environment clients/run makes, <target>/client-checks/venv/bin/python.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

/// What else `torture` runs.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Real file-system faults under the real relay: a full disk, a read-only
    /// remount, a low open-file limit, EIO from crashfs (docs/faults.md).
    Faults(FaultsArgs),
    /// Deploys under load that must refuse no connection: SIGHUP hand-overs, and
    /// kill -9 under a supervisor holding the listening socket (docs/torture.md).
    Deploys(DeploysArgs),
}

/// Where everything the run starts is.
#[derive(Debug, Clone)]
pub struct Paths {
    pub relay: PathBuf,
    pub fake: PathBuf,
    pub spool: PathBuf,
    pub node: PathBuf,
    pub node_writer: PathBuf,
    pub python: PathBuf,
    pub python_writer: PathBuf,
    pub work: PathBuf,
}

impl Args {
    /// How long the chaos may last, if bounded.
    pub fn time_bound(&self) -> Option<Duration> {
        self.minutes
            .map(|m| Duration::from_secs_f64(m.max(0.0) * 60.0))
    }

    /// Resolves every path, checking that the binaries and scripts exist.
    pub fn paths(&self) -> anyhow::Result<Paths> {
        self.tools
            .paths(&self.load.writers, self.work.as_deref(), "torture")
    }
}

impl ToolArgs {
    /// Every path, the working directory `work` or `<target>/<default_work>`;
    /// checks that the binaries and the scripts of `writers` exist.
    pub fn paths(
        &self,
        writers: &[WriterKind],
        work: Option<&Path>,
        default_work: &str,
    ) -> anyhow::Result<Paths> {
        let exe = std::env::current_exe().context("cannot find this binary's path")?;
        let exe_dir = exe.parent().unwrap_or(Path::new(".")).to_path_buf();
        let bin_dir = self.bin_dir.clone().unwrap_or_else(|| exe_dir.clone());
        // <target>/debug/torture: the target directory is one up.
        let target = exe_dir.parent().unwrap_or(Path::new(".")).to_path_buf();
        let clients = self
            .clients
            .clone()
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients"));
        let python = self
            .python
            .clone()
            .unwrap_or_else(|| target.join("client-checks/venv/bin/python"));
        let paths = Paths {
            relay: bin_dir.join("spool-relay"),
            fake: bin_dir.join("fake-gcs"),
            spool: bin_dir.join("spool"),
            node: self.node.clone(),
            node_writer: clients.join("torture/writer.js"),
            python,
            python_writer: clients.join("torture/writer.py"),
            work: work.map_or_else(|| target.join(default_work), Path::to_path_buf),
        };
        paths.check(writers, &clients)?;
        Ok(paths)
    }
}

impl Paths {
    /// Copies spool-relay, fake-gcs and spool into `dir` and runs those from then on:
    /// a rebuild during a long run must not change the binaries under test.
    pub fn copy_binaries(&mut self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)?;
        for bin in [&mut self.relay, &mut self.fake, &mut self.spool] {
            let copy = dir.join(bin.file_name().context("a binary without a name")?);
            std::fs::copy(&*bin, &copy)
                .with_context(|| format!("cannot copy {} to {}", bin.display(), copy.display()))?;
            *bin = copy;
        }
        Ok(())
    }

    fn check(&self, writers: &[WriterKind], clients: &Path) -> anyhow::Result<()> {
        for bin in [&self.relay, &self.fake, &self.spool] {
            if !bin.is_file() {
                bail!(
                    "{} is missing: build the binaries first (docs/torture.md):\n  cargo build -p \
                     relay --bin spool-relay -p fake-gcs --bin fake-gcs -p torture\n  cargo build \
                     -p spool --features cli --bin spool\nor give --bin-dir",
                    bin.display()
                );
            }
        }
        if writers.contains(&WriterKind::Node) {
            let modules = clients.join("node/node_modules/@google-cloud/storage");
            if !modules.is_dir() || !self.node_writer.is_file() {
                bail!(
                    "{} is missing: run `npm ci` in clients/node (clients/run does), or leave \
                     node out of --writers",
                    modules.display()
                );
            }
        }
        if writers.contains(&WriterKind::Python)
            && (!self.python.exists() || !self.python_writer.is_file())
        {
            bail!(
                "{} is missing: run clients/run once (it makes that virtual environment), give \
                 --python, or leave python out of --writers",
                self.python.display()
            );
        }
        Ok(())
    }
}

/// A fault to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum FaultKind {
    /// A full disk: the spool on a small tmpfs.
    Full,
    /// A read-only remount of the spool's tmpfs while the relay runs.
    Readonly,
    /// A low open-file limit on the relay.
    Fds,
    /// EIO from crashfs: directory fsyncs, writes and file fsyncs, then unlinks.
    Eio,
}

impl FaultKind {
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::Full => "full",
            FaultKind::Readonly => "readonly",
            FaultKind::Fds => "fds",
            FaultKind::Eio => "eio",
        }
    }
}

/// `torture faults`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct FaultsArgs {
    /// The faults to produce (default: all, in this order).
    #[arg(long, value_delimiter = ',', default_value = "full,readonly,fds,eio")]
    pub only: Vec<FaultKind>,
    /// Working directory (mounts, logs); emptied first. Default: <target>/faults.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Where spool-relay, fake-gcs and spool are. Default: this binary's directory.
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Where the recorded promtool tests (recorded-<fault>.yml) are written. Default:
    /// <work>/alerts; spool/alerts/tests refreshes the committed ones.
    #[arg(long, value_name = "DIR")]
    pub tests_dir: Option<PathBuf>,
}

/// How `torture deploys` restarts the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum DeployMode {
    /// The relay binds its own --listen port; each deploy is a SIGHUP: it hands
    /// its socket to a new process of its own command line and stops.
    Sighup,
    /// This harness binds the socket once and passes it as descriptor 3 with
    /// LISTEN_FDS=1 (systemd socket activation); each deploy is a SIGKILL and a new
    /// start on the same socket.
    Kill,
    /// The control, as before socket activation: the relay binds its own --listen
    /// port; each deploy is a SIGKILL and a new start binding it again. Connections
    /// that come while no process listens are refused, so this mode fails: it
    /// shows what the count of refusals sees. Not among the default modes.
    Rebind,
}

impl DeployMode {
    pub fn label(self) -> &'static str {
        match self {
            DeployMode::Sighup => "sighup",
            DeployMode::Kill => "kill",
            DeployMode::Rebind => "rebind",
        }
    }
}

/// `torture deploys`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DeploysArgs {
    /// The modes to run, one after the other, each with its own fake, spool and
    /// writers.
    #[arg(long, value_delimiter = ',', default_value = "sighup,kill")]
    pub modes: Vec<DeployMode>,
    /// Deploys (SIGHUPs, or SIGKILLs and starts) in each mode.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub deploys: u64,
    /// In the sighup mode, this many more SIGHUPs whose new relay fails (its binary
    /// replaced by one that exits, alternately at once and after it said it is
    /// prepared to take over), spread among the deploys: the old relay must serve
    /// on, or start again on its socket, refusing nothing.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub failing_successors: u64,
    /// Shortest load before each deploy (and after the last).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub min_gap_ms: u64,
    /// Longest load before each deploy; each gap is drawn from the seed.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub max_gap_ms: u64,
    /// The harness's own probe: a TCP connect to the relay's address this often,
    /// counting refusals apart from the clients' (0: no probe).
    #[arg(long, value_name = "MS", default_value_t = 5)]
    pub probe_ms: u64,
    /// Seed of the gaps and the writers' workloads.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Working directory (the spools, the logs); emptied first. Default:
    /// <target>/deploys.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    #[command(flatten)]
    pub load: WriterArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// An extra flag for spool-relay (repeatable), e.g. --relay-arg=--workers=8.
    #[arg(long = "relay-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub relay_args: Vec<String>,
    /// The relay's --shutdown-grace: an old process must exit within it after a
    /// SIGHUP.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub shutdown_grace_secs: u64,
    /// How long the end may wait for writers to finish and for the spool to drain.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub settle_secs: u64,
}

impl DeploysArgs {
    /// Resolves every path, checking that the binaries and scripts exist.
    pub fn paths(&self) -> anyhow::Result<Paths> {
        self.tools
            .paths(&self.load.writers, self.work.as_deref(), "deploys")
    }
}
