//! Deterministic outage bench for the spool.
