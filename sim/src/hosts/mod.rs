//! The hosts of the turmoil world, each one boot of its software at a time, and
//! what they share with the world, below them.
//!
//! | file | what |
//! |---|---|
//! | `control.rs` | host names and ports, the world's handle on each host, the run's shared state, the start of a boot |
//! | `node.rs` | one boot of a host with a spool (app host or relay): spool, uploader, drainer, sampler, graceful stop |
//! | `app.rs` | the app host: its producer per boot, through its own spool or the relay |
//! | `relay.rs` | the relay host (`[relay]`): the production `spool-relay` on a host with a spool |
//! | `relay_client.rs` | the app hosts' client for the relay, and what its answers tell the caller |
//! | `relay_reader.rs` | an app host's reads, lists and deletes through the relay between its writes |
//! | `gcs.rs` | the fake Cloud Storage as a host: accept loop and clock |
//!
//! Imports go down the table's dependencies: `app` uses `node`, `relay_client` and
//! `relay_reader` (which uses `relay_client`),
//! `relay` uses `node`, and all of them use `control`; nothing here imports `app`.

pub mod app;
pub mod control;
pub mod gcs;
pub mod node;
pub mod relay;
pub mod relay_client;
pub mod relay_reader;
