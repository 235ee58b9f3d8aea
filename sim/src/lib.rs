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
//! Each row imports only rows below it (the `sim` command, `src/bin/sim/`, sits on
//! top and imports any of them).
//!
//! | module | what |
//! |---|---|
//! | [`report`] | time series, `report.json`/`.md`, CSV, charts, sweep distributions, the planner |
//! | [`sweep`] | seeds x variants as independent runs: shards, results locations, merge |
//! | [`checker`] | the invariants, judged from the ledger, the bucket and the inventories |
//! | [`world`] | the turmoil world: hosts, events, stepping, wind-down, inventories |
//! | [`hosts`] | the hosts: app (producer), relay, the fake; one boot of a host with a spool; what they share with the world |
//! | [`inventory`] | each host's final inventory, after a last power loss and a reopen, every entry decoded |
//! | [`recorder`] | samples, events and inventories, outside the hosts |
//! | [`workload`] | what producers write: names (plain or hard), attributes, other writers who take a name first |
//! | [`mutants`] | deliberate bugs planted at the disk and object-store seams, each of which a shipped scenario must catch |
//! | [`scenario`] | scenario files: raw TOML, then a checked [`scenario::Scenario`] |
//! | [`simdisk`] | the bench's own disk behind `spool::Disk`: inodes, live and durable views, the crash model, faults per operation |
//! | [`connector`] | `object_store`'s HTTP transport over turmoil TCP |
//! | [`ledger`] | what every caller was told, outside the hosts |
//! | [`seed`] | one seed per purpose, host and boot, from the scenario's |
//! | [`logging`] | log lines stamped with the simulated time, plain off a terminal |
//!
//! The fake knows nothing of the spool, and the spool nothing of either.
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
pub mod sweep;
pub mod workload;
pub mod world;
