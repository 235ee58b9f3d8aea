//! A `file://` (any `object_store`) upstream answered in Cloud Storage's JSON
//! shapes: an object's resource, its bytes (one `Range`), the XML API's `GET` and
//! `HEAD`, a JSON list (prefix, delimiter, `maxResults`, `pageToken`,
//! `startOffset`, `endOffset`, `matchGlob`), an XML list (`list-type=2`: prefix,
//! delimiter, `max-keys`, `continuation-token`, `start-after`) and a delete. The rest is 501 naming the route: a store has no
//! generations, metadata patches or compose.
//!
//! An object's generation is its modification time in microseconds; it has no
//! checksums (the store keeps none), so clients skip their validation.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use fake_gcs::wire::{
    Api, ListQuery, Reply, XmlContents, encode_component, header, resolve_range, xml_list_page,
};
use futures::TryStreamExt as _;
use http_body_util::BodyExt as _;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};

use super::{Forward, Op, PassError, ResponseBody, whole};

/// The most entries a list page holds, as Cloud Storage's.
const MAX_LIST_RESULTS: usize = 1000;

/// Answers `forward` from `store`.
pub(super) async fn answer(
    store: &dyn ObjectStore,
    forward: Forward<'_>,
) -> Result<http::Response<ResponseBody>, PassError> {
    let bucket = forward.route.bucket().unwrap_or_default();
    let name = forward.route.object().unwrap_or_default();
    let reply = match forward.op {
        Op::Metadata => {
            let meta = store.head(&path(name)?).await?;
            Reply::json(200, &resource(forward.base, bucket, &meta))
        }
        Op::Media => return media(store, name, forward.headers).await,
        Op::Head => object_headers(Reply::new(200), &store.head(&path(name)?).await?),
        Op::List(api) => list(store, api, forward.base, bucket, forward.query).await?,
        Op::Delete(_) => {
            store.delete(&path(name)?).await?;
            Reply::new(204)
        }
        op @ Op::Other => {
            return Err(PassError::NotServed {
                route: op.name(),
                upstream: store.to_string(),
                why: "an object_store upstream answers object GET, HEAD, lists and DELETE only"
                    .into(),
            });
        }
    };
    let head_len = reply.head_len;
    let body = whole(match head_len {
        Some(_) => Bytes::new(),
        None => reply.body.clone(),
    });
    Ok(reply.into_response(body))
}

/// The store path of `name`, or 400.
fn path(name: &str) -> Result<Path, PassError> {
    spool::name::check_writable(name)
        .map_err(|e| PassError::Refused(fake_gcs::wire::Rejection::invalid(e.to_string())))
}

/// An object's JSON resource, from what the store knows of it.
fn resource(base: &str, bucket: &str, meta: &ObjectMeta) -> Value {
    let name = meta.location.as_ref();
    let generation = meta.last_modified.timestamp_micros().to_string();
    let updated = meta.last_modified.to_rfc3339();
    let encoded = encode_component(name);
    json!({
        "kind": "storage#object",
        "id": format!("{bucket}/{name}/{generation}"),
        "selfLink": format!("{base}/storage/v1/b/{bucket}/o/{encoded}"),
        "mediaLink": format!(
            "{base}/download/storage/v1/b/{bucket}/o/{encoded}?generation={generation}&alt=media"
        ),
        "name": name,
        "bucket": bucket,
        "generation": generation,
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "size": meta.size.to_string(),
        "timeCreated": updated,
        "updated": updated,
        "etag": meta.e_tag.clone().unwrap_or_else(|| generation.clone()),
    })
}

/// The XML API's headers for an object, with its length.
fn object_headers(reply: Reply, meta: &ObjectMeta) -> Reply {
    let generation = meta.last_modified.timestamp_micros().to_string();
    let mut reply = reply
        .header("content-type", "application/octet-stream")
        .header("x-goog-generation", generation)
        .header("x-goog-metageneration", "1")
        .header("x-goog-stored-content-length", meta.size.to_string())
        .header(
            "last-modified",
            fake_gcs::wire::http_date(meta.last_modified.timestamp_millis().max(0) as u64),
        )
        .header("accept-ranges", "bytes");
    if let Some(etag) = &meta.e_tag {
        reply = reply.header("etag", format!("\"{etag}\""));
    }
    reply.head_len = Some(meta.size);
    reply
}

/// An object's bytes, or the one range asked for; streamed from the store.
async fn media(
    store: &dyn ObjectStore,
    name: &str,
    headers: &http::HeaderMap,
) -> Result<http::Response<ResponseBody>, PassError> {
    let path = path(name)?;
    let meta = store.head(&path).await?;
    let mut reply = object_headers(Reply::new(200), &meta);
    let mut options = GetOptions::default();
    if let Some(asked) = header(headers, "range") {
        let Some((first, last)) = resolve_range(asked, meta.size) else {
            let refused = Reply::new(416).header("content-range", format!("bytes */{}", meta.size));
            return Ok(refused.into_response(whole(Bytes::new())));
        };
        reply.status = 206;
        reply = reply.header(
            "content-range",
            format!("bytes {first}-{last}/{}", meta.size),
        );
        reply.head_len = Some(last + 1 - first);
        options.range = Some(GetRange::Bounded(first..last + 1));
    }
    if meta.size == 0 {
        return Ok(reply.into_response(whole(Bytes::new())));
    }
    let stream = store.get_opts(&path, options).await?.into_stream();
    let frames = stream
        .map_ok(hyper::body::Frame::data)
        .map_err(|e| Box::new(e) as super::BoxError);
    let body = http_body_util::StreamBody::new(frames).boxed_unsync();
    Ok(reply.into_response(body))
}

/// One page of the list `query` asks for, in `api`'s shape.
async fn list(
    store: &dyn ObjectStore,
    api: Api,
    base: &str,
    bucket: &str,
    query: &fake_gcs::wire::Query,
) -> Result<Reply, PassError> {
    let asked = ListQuery::parse(api, query, MAX_LIST_RESULTS).map_err(PassError::Refused)?;
    let mut objects = listed(store, &asked.prefix).await?;
    objects.sort_by(|a, b| a.location.as_ref().cmp(b.location.as_ref()));
    let page = page(&objects, &asked);
    let token = (page.resume_after.as_ref()).map(|after| URL_SAFE_NO_PAD.encode(after.as_bytes()));
    Ok(match api {
        Api::Json => Reply::json(200, &json_page(&page, base, bucket, token)),
        Api::Xml => Reply::xml(200, xml_page(&page, bucket, &asked, token)),
    })
}

/// A JSON API list page (`storage#objects`).
fn json_page(page: &Page<'_>, base: &str, bucket: &str, token: Option<String>) -> Value {
    let mut body = json!({ "kind": "storage#objects" });
    if !page.items.is_empty() {
        let items: Vec<Value> = (page.items.iter())
            .map(|meta| resource(base, bucket, meta))
            .collect();
        body["items"] = Value::Array(items);
    }
    if !page.prefixes.is_empty() {
        body["prefixes"] = json!(page.prefixes);
    }
    if let Some(token) = token {
        body["nextPageToken"] = Value::String(token);
    }
    body
}

/// An XML API list page (`ListBucketResult`, as `list-type=2` gives it: the form
/// `object_store`'s own GCS client reads).
fn xml_page(page: &Page<'_>, bucket: &str, asked: &ListQuery, token: Option<String>) -> String {
    let contents: Vec<String> = (page.items.iter())
        .map(|meta| {
            let generation = meta.last_modified.timestamp_micros();
            let etag = meta.e_tag.clone().unwrap_or_else(|| generation.to_string());
            XmlContents {
                name: meta.location.as_ref(),
                generation,
                metageneration: 1,
                last_modified_unix_ms: meta.last_modified.timestamp_millis().max(0) as u64,
                etag: &format!("\"{etag}\""),
                size: meta.size,
            }
            .render()
        })
        .collect();
    xml_list_page(bucket, asked, token.as_deref(), &contents, &page.prefixes)
}

/// Every object whose name starts with `prefix` (the store lists by directory:
/// the prefix's directory is listed, then filtered).
async fn listed(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<ObjectMeta>, PassError> {
    let directory = match prefix.rsplit_once('/') {
        Some((directory, _)) if !directory.is_empty() => Some(Path::from(directory)),
        _ => None,
    };
    let all: Vec<ObjectMeta> = store.list(directory.as_ref()).try_collect().await?;
    Ok(all
        .into_iter()
        .filter(|meta| meta.location.as_ref().starts_with(prefix))
        .collect())
}

/// One page of a listing.
struct Page<'a> {
    items: Vec<&'a ObjectMeta>,
    prefixes: Vec<String>,
    resume_after: Option<String>,
}

/// The page of `sorted` (names with the prefix, in order) that `asked` wants:
/// names folded into common prefixes at the delimiter, at most `asked.max` entries.
fn page<'a>(sorted: &'a [ObjectMeta], asked: &ListQuery) -> Page<'a> {
    let mut page = Page {
        items: Vec::new(),
        prefixes: Vec::new(),
        resume_after: None,
    };
    let mut last_taken: Option<&str> = None;
    for meta in sorted {
        let name = meta.location.as_ref();
        if !wanted(name, asked) {
            continue;
        }
        let folded = common_prefix(name, asked);
        if let Some(folded) = &folded
            && page.prefixes.last() == Some(folded)
        {
            last_taken = Some(name);
            continue;
        }
        if page.items.len() + page.prefixes.len() == asked.max {
            page.resume_after = last_taken.map(str::to_string);
            break;
        }
        match folded {
            Some(folded) => page.prefixes.push(folded),
            None => page.items.push(meta),
        }
        last_taken = Some(name);
    }
    page
}

/// Whether `name` is within the page's bounds (`pageToken`, `startOffset`,
/// `endOffset`) and matches its `matchGlob`.
fn wanted(name: &str, asked: &ListQuery) -> bool {
    !(asked.after.as_deref().is_some_and(|after| name <= after)
        || asked.from.as_deref().is_some_and(|from| name < from)
        || asked.before.as_deref().is_some_and(|before| name >= before)
        || asked.glob.as_ref().is_some_and(|glob| !glob.matches(name)))
}

/// The common prefix `name` folds into at the delimiter, if any.
fn common_prefix(name: &str, asked: &ListQuery) -> Option<String> {
    let delimiter = asked.delimiter.as_deref().filter(|d| !d.is_empty())?;
    let rest = name.strip_prefix(asked.prefix.as_str())?;
    let at = rest.find(delimiter)?;
    Some(format!("{}{}", asked.prefix, &rest[..at + delimiter.len()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(name),
            last_modified: Default::default(),
            size: 1,
            e_tag: None,
            version: None,
        }
    }

    fn names(page: &Page<'_>) -> (Vec<String>, Vec<String>) {
        let items = page.items.iter().map(|m| m.location.to_string()).collect();
        (items, page.prefixes.clone())
    }

    #[test]
    fn pages_fold_at_the_delimiter_and_resume_after_the_last_name_taken() {
        let sorted: Vec<ObjectMeta> = ["p/a", "p/d/1", "p/d/2", "p/e", "p/f/1"]
            .into_iter()
            .map(meta)
            .collect();
        let mut asked = ListQuery {
            prefix: "p/".into(),
            delimiter: Some("/".into()),
            max: 2,
            ..ListQuery::default()
        };
        let first = page(&sorted, &asked);
        assert_eq!(names(&first), (vec!["p/a".into()], vec!["p/d/".into()]));
        assert_eq!(first.resume_after.as_deref(), Some("p/d/2"));
        asked.after = first.resume_after;
        let second = page(&sorted, &asked);
        assert_eq!(names(&second), (vec!["p/e".into()], vec!["p/f/".into()]));
        assert_eq!(second.resume_after, None);
    }
}
