//! Where a passed-through request goes: the upstream's path is built from the
//! route the relay checked, never taken from the path as the client sent it.
//!
//! What it owns: [`plan`], which decides from a request's route whether it passes
//! through, and the path the upstream is then asked for ([`Upstream`]).
//!
//! What it promises:
//!
//! - The upstream is asked for exactly the resource the relay decided on: every
//!   bucket in the path is the relay's own, and every object name (and ACL entity)
//!   is one percent-encoded segment (`/` as `%2F`, everything but `A-Z a-z 0-9 - . _
//!   ~` escaped), never empty, `.` or `..`. No URL parser on the way (reqwest's,
//!   the upstream's) can resolve such a path to another resource: the raw path's
//!   dot segments and backslashes are refused before routing
//!   (`wire::ambiguous_path`), and the raw path is never forwarded.
//! - A request that names a second bucket (a copy's or rewrite's destination)
//!   passes through only when both are the relay's; any other bucket is 404.
//! - Only the bucket's objects pass through: their metadata, bytes, lists,
//!   deletes, patches, ACLs, copies, rewrites, moves and compose, and (to an HTTP
//!   upstream) the bucket's own resource. The bucket's IAM policy, ACLs,
//!   notifications and managed folders, other buckets, projects and HMAC keys are
//!   never asked for with the relay's credentials.

use fake_gcs::wire::{AclScope, Api, MetaRoute, Rejection, Route, encode_component};
use http::Method;

use super::{Op, PassThrough};

/// What the relay does with a request, by its route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Not a pass-through route: the handler serves it.
    Serve,
    /// A pass-through route on another bucket than the upstream's: 404.
    OtherBucket,
    /// A pass-through route naming what no object can be called (an empty name,
    /// `.` or `..`): refused, never sent.
    Refused(Rejection),
    /// Passed through to the upstream.
    Forward(Upstream),
}

/// A request as the upstream is asked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upstream {
    /// Which kind of request (a store-backed upstream serves some of them).
    pub(crate) op: Op,
    /// The upstream's path, built from the route (the client's query follows it).
    pub(crate) path: String,
}

/// What `pass_through` does with `method route` (`path` as sent) for a relay
/// writing to `bucket`.
pub(crate) fn plan(
    pass_through: &PassThrough,
    method: &Method,
    route: &Route,
    path: &str,
    bucket: &str,
) -> Plan {
    let forwards_everything = pass_through.forwards_everything();
    plan_for(
        pass_through,
        forwards_everything,
        method,
        route,
        path,
        bucket,
    )
}

/// [`plan`], for an upstream that takes every route (`forwards_everything`: the
/// bucket's own resource too) or not.
pub(super) fn plan_for(
    pass_through: &PassThrough,
    forwards_everything: bool,
    method: &Method,
    route: &Route,
    path: &str,
    bucket: &str,
) -> Plan {
    if !pass_through.is_on() {
        return Plan::Serve;
    }
    let asked = match Asked::of(forwards_everything, method, route, path) {
        Ok(Some(asked)) => asked,
        Ok(None) => return Plan::Serve,
        Err(refused) => return Plan::Refused(refused),
    };
    if asked.buckets().iter().any(|named| *named != bucket) {
        return Plan::OtherBucket;
    }
    match asked.upstream() {
        Ok(upstream) => Plan::Forward(upstream),
        Err(refused) => Plan::Refused(refused),
    }
}

/// A request that passes through, with the buckets and names its path holds.
enum Asked<'a> {
    /// An object's resource or bytes (JSON `/storage/v1/...` or
    /// `/download/storage/v1/...`, XML `GET`/`HEAD`).
    Object {
        api: Api,
        bucket: &'a str,
        name: &'a str,
        op: Op,
        download: bool,
    },
    List {
        api: Api,
        bucket: &'a str,
    },
    Delete {
        api: Api,
        bucket: &'a str,
        name: &'a str,
    },
    Compose {
        bucket: &'a str,
        destination: &'a str,
    },
    /// The bucket's own resource.
    Bucket {
        bucket: &'a str,
    },
    /// An object's metadata (`PATCH`, `PUT`), its ACL, a copy, rewrite or move.
    Meta(MetaRoute),
}

impl<'a> Asked<'a> {
    /// What `method route` asks the upstream for, if anything. A JSON API path is
    /// first read as a metadata request, as the fake and Cloud Storage read it
    /// (`DELETE .../o/a/acl/x` is an ACL entry's, not the object `a/acl/x`'s); one
    /// that names an object's metadata, ACL, copy or move passes through, one with a
    /// method its path does not take is refused as the fake refuses it.
    fn of(
        forwards_everything: bool,
        method: &Method,
        route: &'a Route,
        path: &str,
    ) -> Result<Option<Self>, Rejection> {
        if let Route::Invalid { status: 400, .. } = route {
            // A path or query refused before routing: the handler answers it.
            return Ok(None);
        }
        if path.starts_with("/storage/v1/") {
            match MetaRoute::parse(method, path) {
                Some(Ok(meta)) => return Ok(Self::meta(meta)),
                Some(Err(Route::Invalid { status: 404, .. })) => {
                    let message = format!("Not Found: the relay serves no {method} {path}");
                    return Err(Rejection::status(404, message));
                }
                Some(Err(Route::Invalid {
                    status, message, ..
                })) => return Err(Rejection::status(status, message)),
                Some(Err(_)) | None => {}
            }
        }
        Ok(Some(match route {
            Route::ObjectGet {
                api,
                bucket,
                name,
                media,
                head,
            } => Asked::Object {
                api: *api,
                bucket,
                name,
                op: object_get_op(*media, *head),
                download: path.starts_with("/download/"),
            },
            Route::ObjectList { api, bucket } => Asked::List { api: *api, bucket },
            Route::ObjectDelete { api, bucket, name } => Asked::Delete {
                api: *api,
                bucket,
                name,
            },
            Route::Compose {
                bucket,
                destination,
            } => Asked::Compose {
                bucket,
                destination,
            },
            Route::BucketGet { bucket } if forwards_everything => Asked::Bucket { bucket },
            _ => return Ok(None),
        }))
    }

    /// A metadata request that passes through: an object's metadata, its ACL, a
    /// copy, rewrite or move; `None` for the bucket's own settings, projects and
    /// HMAC keys, which are never asked for with the relay's credentials.
    fn meta(meta: MetaRoute) -> Option<Self> {
        match meta {
            MetaRoute::Object { .. }
            | MetaRoute::Copy { .. }
            | MetaRoute::Move { .. }
            | MetaRoute::Acl {
                scope: AclScope::Object,
                ..
            } => Some(Asked::Meta(meta)),
            _ => None,
        }
    }

    /// Every bucket the request names.
    fn buckets(&self) -> Vec<&str> {
        match self {
            Asked::Object { bucket, .. }
            | Asked::List { bucket, .. }
            | Asked::Delete { bucket, .. }
            | Asked::Compose { bucket, .. }
            | Asked::Bucket { bucket } => vec![bucket],
            Asked::Meta(MetaRoute::Copy {
                source_bucket,
                bucket,
                ..
            }) => vec![source_bucket, bucket],
            Asked::Meta(meta) => meta.bucket().into_iter().collect(),
        }
    }

    /// The request as the upstream is asked it.
    fn upstream(&self) -> Result<Upstream, Rejection> {
        const JSON: &str = "/storage/v1/b";
        let (op, path) = match self {
            Asked::Object {
                api: Api::Json,
                bucket,
                name,
                op,
                download,
            } => {
                let prefix = if *download { "/download" } else { "" };
                let (bucket, name) = (segment(bucket)?, segment(name)?);
                (*op, format!("{prefix}{JSON}/{bucket}/o/{name}"))
            }
            Asked::Object {
                api: Api::Xml,
                bucket,
                name,
                op,
                ..
            } => (*op, format!("/{}/{}", segment(bucket)?, segment(name)?)),
            Asked::List { api, bucket } => {
                let bucket = segment(bucket)?;
                let path = match api {
                    Api::Json => format!("{JSON}/{bucket}/o"),
                    Api::Xml => format!("/{bucket}"),
                };
                (Op::List(*api), path)
            }
            Asked::Delete { api, bucket, name } => {
                let (bucket, name) = (segment(bucket)?, segment(name)?);
                let path = match api {
                    Api::Json => format!("{JSON}/{bucket}/o/{name}"),
                    Api::Xml => format!("/{bucket}/{name}"),
                };
                (Op::Delete(*api), path)
            }
            Asked::Compose {
                bucket,
                destination,
            } => {
                let (bucket, name) = (segment(bucket)?, segment(destination)?);
                (Op::Other, format!("{JSON}/{bucket}/o/{name}/compose"))
            }
            Asked::Bucket { bucket } => (Op::Other, format!("{JSON}/{}", segment(bucket)?)),
            Asked::Meta(meta) => (Op::Other, meta_path(meta)?),
        };
        Ok(Upstream { op, path })
    }
}

/// The path of an object's metadata request, ACL, copy, rewrite or move.
fn meta_path(meta: &MetaRoute) -> Result<String, Rejection> {
    const JSON: &str = "/storage/v1/b";
    Ok(match meta {
        MetaRoute::Object { bucket, name, .. } => {
            format!("{JSON}/{}/o/{}", segment(bucket)?, segment(name)?)
        }
        MetaRoute::Acl {
            bucket,
            object: Some(object),
            entity,
            ..
        } => {
            let (bucket, object) = (segment(bucket)?, segment(object)?);
            match entity {
                Some(entity) => format!("{JSON}/{bucket}/o/{object}/acl/{}", segment(entity)?),
                None => format!("{JSON}/{bucket}/o/{object}/acl"),
            }
        }
        MetaRoute::Copy {
            rewrite,
            source_bucket,
            source,
            bucket,
            name,
        } => {
            let to = if *rewrite { "rewriteTo" } else { "copyTo" };
            format!(
                "{JSON}/{}/o/{}/{to}/b/{}/o/{}",
                segment(source_bucket)?,
                segment(source)?,
                segment(bucket)?,
                segment(name)?
            )
        }
        MetaRoute::Move {
            bucket,
            source,
            name,
        } => format!(
            "{JSON}/{}/o/{}/moveTo/o/{}",
            segment(bucket)?,
            segment(source)?,
            segment(name)?
        ),
        other => unreachable!("Asked::of keeps no other metadata route: {other:?}"),
    })
}

/// `text` as one path segment: percent-encoded, `/` included; 400 for what no
/// bucket, object or entity is called, which a URL parser would also drop or
/// resolve (`""`, `.`, `..`).
fn segment(text: &str) -> Result<String, Rejection> {
    match text {
        "" | "." | ".." => Err(Rejection::invalid(format!(
            "The object name {text:?} is not valid: Cloud Storage names are 1-1024 bytes and \
             neither '.' nor '..'."
        ))),
        _ => Ok(encode_component(text)),
    }
}

fn object_get_op(media: bool, head: bool) -> Op {
    match (media, head) {
        (_, true) => Op::Head,
        (true, false) => Op::Media,
        (false, false) => Op::Metadata,
    }
}

#[cfg(all(test, feature = "http-upstream"))]
mod tests {
    use fake_gcs::wire::Query;

    use super::*;

    fn route(method: &Method, uri: &str) -> Route {
        let uri: http::Uri = uri.parse().unwrap();
        Route::parse(method, &uri, &Query::parse(uri.query()))
    }

    fn plan_of(method: &str, uri: &str) -> Plan {
        let on = PassThrough::http("http://127.0.0.1:1", None).unwrap();
        let method: Method = method.parse().unwrap();
        let path = uri.split('?').next().unwrap();
        plan(&on, &method, &route(&method, uri), path, "bkt")
    }

    fn forward(op: Op, path: &str) -> Plan {
        let path = path.to_string();
        Plan::Forward(Upstream { op, path })
    }

    #[test]
    fn reads_lists_deletes_and_patches_of_the_bucket_pass_through_on_a_path_built_anew() {
        let cases = [
            (
                "GET",
                "/storage/v1/b/bkt/o/a",
                Op::Metadata,
                "/storage/v1/b/bkt/o/a",
            ),
            (
                "GET",
                "/storage/v1/b/bkt/o/a/b?alt=media",
                Op::Media,
                "/storage/v1/b/bkt/o/a%2Fb",
            ),
            (
                "GET",
                "/download/storage/v1/b/bkt/o/a?alt=media",
                Op::Media,
                "/download/storage/v1/b/bkt/o/a",
            ),
            (
                "GET",
                "/storage/v1/b/bkt/o/?prefix=a",
                Op::List(Api::Json),
                "/storage/v1/b/bkt/o",
            ),
            (
                "DELETE",
                "/storage/v1/b/bkt/o/a%20b",
                Op::Delete(Api::Json),
                "/storage/v1/b/bkt/o/a%20b",
            ),
            (
                "PATCH",
                "/storage/v1/b/bkt/o/a",
                Op::Other,
                "/storage/v1/b/bkt/o/a",
            ),
            (
                "POST",
                "/storage/v1/b/bkt/o/a/rewriteTo/b/bkt/o/b",
                Op::Other,
                "/storage/v1/b/bkt/o/a/rewriteTo/b/bkt/o/b",
            ),
            (
                "POST",
                "/storage/v1/b/bkt/o/a/moveTo/o/c",
                Op::Other,
                "/storage/v1/b/bkt/o/a/moveTo/o/c",
            ),
            (
                "DELETE",
                "/storage/v1/b/bkt/o/a/acl/allUsers",
                Op::Other,
                "/storage/v1/b/bkt/o/a/acl/allUsers",
            ),
            (
                "POST",
                "/storage/v1/b/bkt/o/a/compose",
                Op::Other,
                "/storage/v1/b/bkt/o/a/compose",
            ),
            ("GET", "/storage/v1/b/bkt", Op::Other, "/storage/v1/b/bkt"),
            ("GET", "/bkt/a/b.txt", Op::Media, "/bkt/a%2Fb.txt"),
            ("HEAD", "/bkt/a", Op::Head, "/bkt/a"),
            ("GET", "/bkt/", Op::List(Api::Xml), "/bkt"),
            ("DELETE", "/bkt/a", Op::Delete(Api::Xml), "/bkt/a"),
        ];
        for (method, uri, op, path) in cases {
            assert_eq!(plan_of(method, uri), forward(op, path), "{method} {uri}");
        }
    }

    #[test]
    fn uploads_stay_with_the_relay_and_other_buckets_are_404() {
        assert_eq!(
            plan_of("POST", "/upload/storage/v1/b/bkt/o?uploadType=media&name=a"),
            Plan::Serve
        );
        assert_eq!(plan_of("PUT", "/bkt/a"), Plan::Serve);
        assert_eq!(plan_of("GET", "/storage/v1/b/other/o/a"), Plan::OtherBucket);
        assert_eq!(
            plan_of("PATCH", "/storage/v1/b/other/o/a"),
            Plan::OtherBucket
        );
        assert_eq!(plan_of("GET", "/other/a"), Plan::OtherBucket);
        assert_eq!(plan_of("GET", "/nothing/here/at/all?x"), Plan::OtherBucket);
        let off = PassThrough::off();
        let get = route(&Method::GET, "/storage/v1/b/bkt/o/a");
        let path = "/storage/v1/b/bkt/o/a";
        assert_eq!(plan(&off, &Method::GET, &get, path, "bkt"), Plan::Serve);
    }

    #[test]
    fn a_copy_or_rewrite_into_another_bucket_is_404() {
        // Found by review (52/3): only the source bucket was checked, so a copy
        // wrote into any bucket the relay's credentials reach.
        for to in ["copyTo", "rewriteTo"] {
            let into_other = format!("/storage/v1/b/bkt/o/a/{to}/b/other/o/a");
            assert_eq!(plan_of("POST", &into_other), Plan::OtherBucket, "{to}");
            let from_other = format!("/storage/v1/b/other/o/a/{to}/b/bkt/o/a");
            assert_eq!(plan_of("POST", &from_other), Plan::OtherBucket, "{to}");
        }
    }

    #[test]
    fn the_buckets_own_settings_are_never_asked_for() {
        for (method, path) in [
            ("PUT", "/storage/v1/b/bkt/iam"),
            ("GET", "/storage/v1/b/bkt/iam"),
            ("PATCH", "/storage/v1/b/bkt"),
            ("POST", "/storage/v1/b/bkt/acl"),
            ("GET", "/storage/v1/b/bkt/notificationConfigs"),
            ("GET", "/storage/v1/b"),
            ("GET", "/storage/v1/projects/p/hmacKeys"),
        ] {
            assert_eq!(plan_of(method, path), Plan::Serve, "{method} {path}");
        }
    }

    #[test]
    fn a_name_no_object_can_have_is_refused_not_sent() {
        // `..%2F..` is the name `../..`, one segment: a name like any other.
        assert_eq!(
            plan_of("GET", "/storage/v1/b/bkt/o/%2E%2E%2F%2E%2E"),
            forward(Op::Metadata, "/storage/v1/b/bkt/o/..%2F..")
        );
        for uri in [
            "/storage/v1/b/bkt/o/a/copyTo/b/bkt/o/",
            "/storage/v1/b/bkt/o//rewriteTo/b/bkt/o/a",
            "/storage/v1/b/bkt/o/a/moveTo/o/",
        ] {
            let plan = plan_of("POST", uri);
            assert!(matches!(plan, Plan::Refused(_)), "{uri}: {plan:?}");
        }
    }

    #[test]
    fn dot_segments_and_backslashes_are_refused_before_routing() {
        // Found by review (52/1, 52/2): the raw path went to reqwest, whose URL
        // parser resolved these after the relay had checked the bucket on the path
        // as sent, reaching other buckets and any path of the upstream.
        for (method, uri) in [
            ("GET", "/bkt/../other/secret.txt"),
            (
                "GET",
                "/storage/v1/b/bkt/o/%2e%2e/%2e%2e/other/o/secret.txt?alt=media",
            ),
            ("GET", "/storage/v1/b/bkt/o/../../other/o"),
            ("DELETE", "/storage/v1/b/bkt/o/.%2E/.%2e/other/o/secret.txt"),
            ("GET", "/storage/v1/b/bkt/o/../.."),
            ("PUT", "/storage/v1/b/bkt/o/../../other/iam"),
            ("GET", "/bkt/..\\other\\secret.txt"),
            ("GET", "/download/storage/v1/b/bkt/o/%2e?alt=media"),
            ("GET", "/bkt/a/./b"),
        ] {
            let method: Method = method.parse().unwrap();
            let routed = route(&method, uri);
            assert!(
                matches!(routed, Route::Invalid { status: 400, ref message, .. }
                    if message.contains("dot segment") || message.contains("backslash")),
                "{uri}: {routed:?}"
            );
            assert_eq!(plan_of(method.as_str(), uri), Plan::Serve, "{uri}");
        }
    }
}
