//! Deterministic outage bench for the spool: the production [`spool`] runs on
//! simulated app hosts (or on a relay host they write through: the production
//! [`relay`]) against the Cloud Storage fake ([`fake_gcs`]) in one turmoil world,
//! through outages, crashes, restarts, deploys and disk faults taken from a
//! scenario file; a checker outside the system judges every write from the
//! producers' ledger and the bucket; the run becomes a report.
//!
//! Everything a run decides comes from the scenario's seed: the same scenario and
//! seed give the same report, byte for byte. Nothing on a simulated path reads real
//! time or real randomness, spawns a thread or iterates a hash map.
//!
//! ## Layout
//!
//! | module | what |
//! |---|---|
//! | [`scenario`] | scenario files: raw TOML, then a checked [`scenario::Scenario`] |
//! | [`world`] | the turmoil world: hosts, events, stepping, wind-down |
//! | [`gcs_host`] | the fake as a turmoil host: accept loop and clock |
//! | [`app`] | the app host: its producer per boot, through its own spool or the relay; the world's handle on every host |
//! | [`node`] | one boot of a host with a spool (app host or relay): spool, uploader, drainer, sampler, graceful stop |
//! | [`relay_host`] | the relay host (`[relay]`): the production `spool-relay` on a host with a spool, and the app hosts' client for it |
//! | [`simdisk`] | the bench's own disk behind `spool::Disk`: inodes, live and durable views, the crash model, faults per operation |
//! | [`workload`] | what producers write: names (plain or hard), attributes, other writers who take a name first |
//! | [`inventory`] | each host's final inventory, after a last power loss and a reopen, every entry decoded |
//! | [`mutants`] | deliberate bugs planted at the disk and object-store seams, each of which a shipped scenario must catch |
//! | [`connector`] | `object_store`'s HTTP transport over turmoil TCP |
//! | [`ledger`] | what every caller was told, outside the hosts |
//! | [`logging`] | log lines stamped with the simulated time, plain off a terminal |
//! | [`recorder`] | samples, events and inventories, outside the hosts |
//! | [`checker`] | the invariants, judged from the ledger, the bucket and the inventories |
//! | [`report`] | time series, `report.json`/`.md`, CSV, charts, sweeps, the planner |
//!
//! Imports go one way: `report` reads what `world`, `recorder` and `checker`
//! produce, and no other module of the library imports it (the `sim` command
//! does). The fake knows nothing of the spool, and the spool nothing of either.
#![warn(missing_docs)]

pub mod checker;
pub mod connector;
pub mod hosts;
pub mod inventory;
pub mod ledger;
pub mod logging;
pub mod mutants;
pub mod recorder;
pub mod report;
pub mod scenario;
pub mod seed;
pub mod simdisk;
pub mod workload;
pub mod world;
