//! The relay's pass-through confined to its bucket (issue 52): whatever request
//! target a client sends, what the relay sends upstream names only its own
//! bucket's resources, and the very request it decided on.
//!
//! Input: one byte choosing the method, then the request target (`/path?query`) as
//! sent on the request line. Asserts, beyond no panic: when
//! `relay::upstream_request` (the path and query an HTTP upstream is asked for) is
//! `Some`, the URL parser reqwest sends with (`url`) keeps its path byte for byte
//! and its query's pairs; routed as the fake routes it (`MetaRoute`, then
//! `Route`), it names the relay's bucket and no other, and it is the route the
//! client's own target has.

#![no_main]

use fake_gcs::wire::{Query, Routed};
use http::{Method, Uri};
use libfuzzer_sys::fuzz_target;

const METHODS: [&str; 7] = ["GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "OPTIONS"];
const BUCKET: &str = "bkt";

fuzz_target!(|data: &[u8]| {
    let Some((&m, target)) = data.split_first() else {
        return;
    };
    let method = Method::from_bytes(METHODS[usize::from(m) % METHODS.len()].as_bytes()).unwrap();
    let Ok(uri) = Uri::try_from(target) else {
        return;
    };
    if uri.scheme().is_some() || uri.path_and_query().is_none() {
        return;
    }
    let Some(sent) = relay::upstream_request(BUCKET, &method, &uri) else {
        return;
    };
    let url = url::Url::parse(&format!("http://upstream{sent}"))
        .unwrap_or_else(|e| panic!("{sent:?} is not a URL's path: {e}"));
    let (sent_path, sent_query) = match sent.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (sent.as_str(), None),
    };
    assert_eq!(url.path(), sent_path, "the URL parser rewrote the path of {sent}");
    assert_eq!(
        Query::parse(url.query()),
        Query::parse(sent_query),
        "the URL parser changed the query of {sent}"
    );
    let upstream = routed(&method, &sent);
    let names = upstream.buckets();
    assert!(!names.is_empty(), "{sent} names no bucket: {upstream:?}");
    for bucket in names {
        assert_eq!(bucket, BUCKET, "{method} {uri} sent {sent}, which reaches {upstream:?}");
    }
    let decided = routed(&method, uri.path_and_query().unwrap().as_str());
    assert_eq!(upstream, decided, "{method} {uri} sent as {sent}");
});

/// What the fake makes of `method target`.
fn routed(method: &Method, target: &str) -> Routed {
    let uri: Uri = target.parse().unwrap_or_else(|e| panic!("{target:?}: {e}"));
    Routed::parse(method, &uri, &Query::parse(uri.query()))
}
