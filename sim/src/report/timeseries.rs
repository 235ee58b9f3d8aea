//! `timeseries.csv`: one row per sample interval.

use std::fmt::Write as _;

use spool::format;

use crate::report::series::Series;
use crate::report::summary::secs;
use crate::world::RunOutput;

/// `timeseries.csv`: one row per sample interval.
pub(crate) fn csv(run: &RunOutput, series: &Series) -> String {
    let mut out = String::from(
        "t_seconds,time,spool_files,spool_bytes,oldest_age_seconds,in_bucket,writes,stored,spooled,rejected,failed,unknown,drained,store_requests",
    );
    for kind in &series.error_kinds {
        let _ = write!(out, ",errors_{kind}");
    }
    out.push('\n');
    for r in &series.rows {
        let _ = write!(
            out,
            "{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{}",
            secs(r.t),
            format::rfc3339_seconds(run.scenario.wall_ms(r.t)),
            r.files,
            r.bytes,
            r.oldest_age_seconds,
            r.in_bucket,
            r.told.writes,
            r.told.stored,
            r.told.spooled,
            r.told.rejected,
            r.told.failed,
            r.told.unknown,
            r.drained,
            r.store_requests
        );
        for kind in &series.error_kinds {
            let _ = write!(out, ",{}", r.store_errors.get(kind).copied().unwrap_or(0));
        }
        out.push('\n');
    }
    out
}
