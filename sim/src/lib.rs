//! Deterministic outage bench for the spool: a Cloud Storage fake that fails on a
//! seeded schedule ([`gcs`]) and an `object_store` HTTP connector over turmoil TCP
//! ([`connector`]).
#![warn(missing_docs)]

pub mod app;
pub mod charts;
pub mod checker;
pub mod connector;
pub mod disk;
pub mod gcs;
pub mod ledger;
pub mod pipeline;
pub mod plan;
pub mod recorder;
pub mod report;
pub mod scenario;
pub mod series;
pub mod simdisk;
pub mod sweep;
pub mod world;
