//! Which exposition format a scrape gets: OpenMetrics when the scraper asks for it
//! (Prometheus does, in its `Accept` header), the Prometheus text format (0.0.4)
//! otherwise, as Prometheus's own client libraries answer. `curl`, `promtool check
//! metrics`, older agents and most other scrapers read only the text format, in
//! which OpenMetrics' `info` type, `# UNIT` and `# EOF` are errors.
//!
//! `prometheus_client` writes OpenMetrics only; [`text_format`] rewrites its output
//! line by line: a counter's family is named as its `_total` sample (its `_created`
//! samples dropped), an info family becomes a gauge named as its `_info` sample,
//! `# UNIT` and `# EOF` go. Samples are otherwise the same in both formats.

/// The `Content-Type` of the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A scrape's exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text ([`super::CONTENT_TYPE`]).
    OpenMetrics,
    /// The Prometheus text format 0.0.4 ([`TEXT_CONTENT_TYPE`]).
    Text,
}

impl Format {
    /// The format for a request's `Accept` header: OpenMetrics when it names
    /// `application/openmetrics-text` with a weight above zero, the text format
    /// otherwise (no header, `*/*`, `text/plain`).
    pub fn for_accept(accept: Option<&str>) -> Format {
        let asks_openmetrics = accept.into_iter().flat_map(|a| a.split(',')).any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media_type = parts.next().unwrap_or("");
            let weight = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            media_type.eq_ignore_ascii_case("application/openmetrics-text") && weight > 0.0
        });
        if asks_openmetrics {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    /// The `Content-Type` of a scrape in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => super::CONTENT_TYPE,
            Format::Text => TEXT_CONTENT_TYPE,
        }
    }
}

/// The Prometheus text format of `openmetrics`, an exposition `prometheus_client`
/// wrote (see the module doc).
pub fn text_format(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A family's HELP comes before its TYPE, which may rename it: held until then.
    let mut help: Option<&str> = None;
    // The current counter family's `_created` samples, dropped.
    let mut created: Option<String> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with("# HELP ") {
            help = Some(line);
            continue;
        }
        if let Some(family) = line.strip_prefix("# TYPE ") {
            let (name, kind) = family.rsplit_once(' ').unwrap_or((family, "untyped"));
            let (renamed, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                _ => (name.to_owned(), "untyped"),
            };
            created = (kind == "counter").then(|| format!("{name}_created"));
            if let Some(help) = help.take() {
                let text = help["# HELP ".len()..].strip_prefix(name).unwrap_or("");
                out.push_str(&format!("# HELP {renamed}{text}\n"));
            }
            out.push_str(&format!("# TYPE {renamed} {kind}\n"));
            continue;
        }
        if let Some(created) = &created
            && line.starts_with(created.as_str())
            && line[created.len()..].starts_with([' ', '{'])
        {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_for_scrapers_that_ask_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::for_accept(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(
            Format::for_accept(Some("application/openmetrics-text")),
            Format::OpenMetrics
        );
        for text in [
            None,
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4"),
            Some("application/openmetrics-text;q=0, text/plain"),
        ] {
            assert_eq!(Format::for_accept(text), Format::Text, "{text:?}");
        }
    }

    #[test]
    fn counters_and_info_are_named_as_their_samples_and_openmetrics_lines_go() {
        let open = "# HELP spool_uploads Uploads by outcome.\n\
                    # TYPE spool_uploads counter\n\
                    spool_uploads_total{outcome=\"stored\"} 3\n\
                    spool_uploads_created{outcome=\"stored\"} 1.5\n\
                    # HELP spool_build Build.\n\
                    # TYPE spool_build info\n\
                    spool_build_info{version=\"1\"} 1\n\
                    # HELP spool_age_seconds Age.\n\
                    # TYPE spool_age_seconds gauge\n\
                    # UNIT spool_age_seconds seconds\n\
                    spool_age_seconds 2.5\n\
                    # HELP spool_uploads_created_total Not a created sample.\n\
                    # TYPE spool_uploads_created_total gauge\n\
                    spool_uploads_created_total 7\n\
                    # EOF\n";
        assert_eq!(
            text_format(open),
            "# HELP spool_uploads_total Uploads by outcome.\n\
             # TYPE spool_uploads_total counter\n\
             spool_uploads_total{outcome=\"stored\"} 3\n\
             # HELP spool_build_info Build.\n\
             # TYPE spool_build_info gauge\n\
             spool_build_info{version=\"1\"} 1\n\
             # HELP spool_age_seconds Age.\n\
             # TYPE spool_age_seconds gauge\n\
             spool_age_seconds 2.5\n\
             # HELP spool_uploads_created_total Not a created sample.\n\
             # TYPE spool_uploads_created_total gauge\n\
             spool_uploads_created_total 7\n"
        );
    }
}
