//! Routing of what a client sends: method, path and query.
//!
//! Input: one byte choosing the method, then the request target (`/path?query`) as
//! sent on the request line. Asserts, beyond no panic:
//!
//! - `Route::parse` and `MetaRoute::parse` never panic, whatever the bytes decode
//!   to (invalid UTF-8 after percent-decoding is a 400 route, never a panic), and
//!   what cannot be served is a 400 or 404.
//! - A query that is not UTF-8 once decoded is refused (400) whatever the path.
//! - Names round-trip: the bucket and object a route names, percent-encoded again
//!   with `encode_component` into the route's canonical path, route to the same
//!   route; `decode_path(encode_component(s)) == s` for each.
//! - A query re-encoded pair by pair parses to the same `Query`.
//! - `ListQuery::parse` keeps a page size within 1..=limit.

#![no_main]

use fake_gcs::wire::{Api, ListQuery, MetaRoute, Query, Route, decode_path, encode_component};
use http::{Method, Uri};
use libfuzzer_sys::fuzz_target;
use percent_encoding::percent_decode_str;

const METHODS: [&str; 8] = [
    "GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "OPTIONS", "BREW",
];

fuzz_target!(|data: &[u8]| {
    let Some((&m, target)) = data.split_first() else {
        return;
    };
    let method = Method::from_bytes(METHODS[usize::from(m) % METHODS.len()].as_bytes()).unwrap();
    // What hyper would hand the server: a request target it accepts.
    let Ok(uri) = Uri::try_from(target) else {
        return;
    };
    if uri.scheme().is_some() {
        return;
    }
    let query = Query::parse(uri.query());
    let route = Route::parse(&method, &uri, &query);

    if let Some(pair) = query.not_utf8() {
        assert!(
            matches!(route, Route::Invalid { status: 400, .. }),
            "query pair {pair:?} is not UTF-8 but routed to {route:?}"
        );
    }
    if let Route::Invalid { status, .. } = &route {
        assert!(matches!(status, 400 | 404), "{route:?}");
    }

    // Names re-encode to the same route.
    for s in [route.bucket(), route.object()].into_iter().flatten() {
        assert_eq!(decode_path(&encode_component(s)).as_deref(), Some(s));
    }
    if let Some(canonical) = canonical_path(&route, &query) {
        let rebuilt = match uri.query() {
            Some(q) => format!("{canonical}?{q}"),
            None => canonical.clone(),
        };
        let rebuilt: Uri = rebuilt
            .parse()
            .unwrap_or_else(|e| panic!("{canonical:?} is not a request target: {e}"));
        let again = Route::parse(&method, &rebuilt, &query);
        assert_eq!(
            again, route,
            "{method} {uri} routed to {route:?}, its canonical path {rebuilt} to {again:?}"
        );
    }

    // The query re-encoded pair by pair is the same query.
    if query.not_utf8().is_none() {
        let decode = |s: &str| {
            percent_decode_str(&s.replace('+', " "))
                .decode_utf8()
                .expect("the query is UTF-8")
                .into_owned()
        };
        let reencoded: Vec<String> = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                format!(
                    "{}={}",
                    encode_component(&decode(k)),
                    encode_component(&decode(v))
                )
            })
            .collect();
        let reencoded = reencoded.join("&");
        assert_eq!(Query::parse(Some(&reencoded)), query, "{reencoded}");
    }

    // The metadata routes.
    match MetaRoute::parse(&method, uri.path()) {
        Some(Err(Route::Invalid { status, .. })) => assert!(matches!(status, 400 | 404)),
        Some(Err(other)) => panic!("MetaRoute refused with a route that is not Invalid: {other:?}"),
        Some(Ok(meta)) => {
            let _ = (meta.operation(), meta.bucket(), meta.object());
        }
        None => {}
    }

    // List parameters.
    for api in [Api::Json, Api::Xml] {
        if let Ok(list) = ListQuery::parse(api, &query, 1000) {
            assert!((1..=1000).contains(&list.max), "{list:?}");
        }
    }
});

/// The path a client that percent-encodes every name (as the official clients do)
/// sends for `route`; `None` for routes with no names, or an empty bucket (no
/// client names one: `/storage/v1/b/` lists the buckets).
fn canonical_path(route: &Route, query: &Query) -> Option<String> {
    let e = |s: &str| encode_component(s);
    let bucket = route.bucket().filter(|b| !b.is_empty())?;
    // Every XML route on an object (PUT, GET, HEAD, DELETE, its multipart steps).
    if route.api() == Api::Xml {
        return Some(match route.object() {
            Some(name) => format!("/{}/{}", e(bucket), e(name)),
            None => format!("/{}", e(bucket)),
        });
    }
    Some(match route {
        Route::BucketGet { .. } => format!("/storage/v1/b/{}", e(bucket)),
        Route::ObjectList { .. } => format!("/storage/v1/b/{}/o", e(bucket)),
        Route::ObjectGet { name, media, .. } => {
            match *media && query.get("alt") != Some("media") {
                // Media without `alt=media`: it came by `/download/...`.
                true => format!("/download/storage/v1/b/{}/o/{}", e(bucket), e(name)),
                false => format!("/storage/v1/b/{}/o/{}", e(bucket), e(name)),
            }
        }
        Route::ObjectDelete { name, .. } => {
            format!("/storage/v1/b/{}/o/{}", e(bucket), e(name))
        }
        Route::Upload { .. } | Route::ResumableChunk { .. } | Route::ResumableCancel { .. } => {
            format!("/upload/storage/v1/b/{}/o", e(bucket))
        }
        Route::Compose { destination, .. } => {
            format!("/storage/v1/b/{}/o/{}/compose", e(bucket), e(destination))
        }
        other => panic!("a JSON route with a bucket this target does not know: {other:?}"),
    })
}
