//! Lists that show what is still in the spool: a JSON or XML object list through
//! the relay, while objects it answered `spooled` are not yet delivered, is the
//! upstream's page merged in name order with those objects.
//!
//! How a page is made:
//!
//! - The upstream is asked for the same list (prefix, delimiter, `endOffset`,
//!   `matchGlob`, `includeTrailingDelimiter`, `versions`) with one entry more than
//!   the client's page size, resuming where the client's page token says (JSON
//!   `startOffset`, XML `start-after`) instead of passing the token on, and
//!   without `fields` (the relay needs the names).
//! - The spooled names are filtered as the upstream filters its own (prefix,
//!   offsets, glob, folded at the delimiter) and kept up to the upstream page's
//!   last entry when the upstream says there is more, or all when it does not.
//!   A name both spooled and listed by the upstream (the drainer delivered it) is
//!   listed once, as the upstream has it.
//! - The merged entries are cut at the page size; the page token is the URL-safe
//!   base64 of the last entry given (a name, or a common prefix), the format
//!   fake-gcs uses. Resuming after a common prefix skips every name under it.
//!
//! Only a relay with spooled objects merges; otherwise the list passes through
//! untouched (and its page tokens are the upstream's: fake-gcs's are the same
//! format, Cloud Storage's are not, so a Cloud Storage token presented while the
//! relay merges is read as a name or refused 400 "Invalid pageToken").

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fake_gcs::wire::{
    Api, ListQuery, ObjectRecord, Query, Rejection, Reply, XmlContents, encode_component,
    xml_list_page,
};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use spool::Spool;

use crate::passthrough::{Forward, PassError, ResponseBody, whole};
use crate::spooled::{SpooledObjects, Walk};

/// The most entries a page holds, as Cloud Storage's.
const MAX_LIST_RESULTS: usize = 1000;

/// The largest upstream list page the relay reads to merge.
const MAX_PAGE_BYTES: usize = 16 << 20;

/// The upstream page bytes all lists being merged at once may hold: a few pages of
/// the largest size, or dozens of everyday ones (1,000 items are about 1 MiB).
pub(crate) const MERGE_BUDGET_BYTES: usize = 32 << 20;

/// What a merged list needs of the request.
pub(crate) struct Merging {
    pub(crate) api: Api,
    pub(crate) bucket: String,
    pub(crate) base: String,
}

/// One entry of a page: a common prefix, or an object rendered in the page's API.
#[derive(Debug, Clone)]
enum Entry {
    Prefix(String),
    Object { name: String, rendered: Rendered },
}

#[derive(Debug, Clone)]
enum Rendered {
    Json(Value),
    Xml(String),
}

impl Entry {
    /// Where it sorts: its name or prefix; a prefix before an object of the same
    /// name.
    fn key(&self) -> (&str, u8) {
        match self {
            Entry::Prefix(p) => (p, 0),
            Entry::Object { name, .. } => (name, 1),
        }
    }
}

/// Where a page resumes.
struct Resume {
    /// Names at or before this are skipped.
    after: Option<String>,
    /// Names under this common prefix are skipped (the last page ended with it).
    past_prefix: Option<String>,
}

impl Resume {
    /// Where `asked`'s page resumes: after its token's name, past the common
    /// prefix that name folds into, if any.
    fn of(asked: &ListQuery) -> Self {
        let past_prefix = match &asked.after {
            Some(after) => common_prefix(after, asked),
            None => None,
        };
        Resume {
            after: asked.after.clone(),
            past_prefix,
        }
    }

    fn skips(&self, name: &str) -> bool {
        self.after.as_deref().is_some_and(|after| name <= after)
            || self
                .past_prefix
                .as_deref()
                .is_some_and(|p| name.starts_with(p))
    }

    /// The first name that may follow (JSON `startOffset`).
    fn first(&self) -> Option<String> {
        match (&self.past_prefix, &self.after) {
            (Some(prefix), _) => Some(successor(prefix).unwrap_or_else(|| prefix.clone())),
            (None, after) => after.clone(),
        }
    }
}

/// The least string greater than every string starting with `prefix`, when its
/// last character can be incremented.
pub(crate) fn successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    let last = chars.pop()?;
    let next = char::from_u32(last as u32 + 1)?;
    chars.push(next);
    Some(chars.into_iter().collect())
}

/// The common prefix `name` folds into at the delimiter, if any.
fn common_prefix(name: &str, asked: &ListQuery) -> Option<String> {
    let delimiter = asked.delimiter.as_deref().filter(|d| !d.is_empty())?;
    let rest = name.strip_prefix(asked.prefix.as_str())?;
    let at = rest.find(delimiter)?;
    Some(format!("{}{}", asked.prefix, &rest[..at + delimiter.len()]))
}

/// Whether `name` is within `asked`'s prefix, offsets and glob.
fn wanted(name: &str, asked: &ListQuery, resume: &Resume) -> bool {
    name.starts_with(asked.prefix.as_str())
        && !resume.skips(name)
        && asked.from.as_deref().is_none_or(|from| name >= from)
        && asked.before.as_deref().is_none_or(|before| name < before)
        && asked.glob.as_ref().is_none_or(|glob| glob.matches(name))
}

/// The query keys the relay sets itself when it asks the upstream.
fn replaced(api: Api, key: &str) -> bool {
    match api {
        Api::Json => matches!(key, "pageToken" | "startOffset" | "maxResults" | "fields"),
        Api::Xml => matches!(key, "continuation-token" | "start-after" | "max-keys"),
    }
}

/// A list being merged: what the upstream is asked, and what the page needs.
pub(crate) struct Prepared {
    /// The upstream's request URI and query.
    pub(crate) uri: http::Uri,
    pub(crate) query: Query,
    asked: ListQuery,
    resume: Resume,
    merging: Merging,
}

/// The upstream's request for the list `forward` asks, merged with `merging`'s
/// objects; 400 for a list query the relay cannot read.
pub(crate) fn prepare(forward: &Forward<'_>, merging: Merging) -> Result<Prepared, PassError> {
    let api = merging.api;
    let asked =
        ListQuery::parse(api, forward.query, MAX_LIST_RESULTS).map_err(PassError::Refused)?;
    let resume = Resume::of(&asked);
    let query = upstream_query(api, forward.uri.query().unwrap_or(""), &asked, &resume);
    let uri: http::Uri = (format!("{}?{query}", forward.path).parse())
        .map_err(|e| PassError::Refused(Rejection::invalid(format!("Invalid list query: {e}"))))?;
    Ok(Prepared {
        uri,
        query: Query::parse(Some(&query)),
        asked,
        resume,
        merging,
    })
}

impl Prepared {
    /// The merged page: the upstream's `answer`, with the spooled objects it
    /// covers.
    ///
    /// Memory: the page is read whole (at most [`MAX_PAGE_BYTES`]), parsed once
    /// and its items moved, not copied, into the merged page. The pages being
    /// merged and sent at once hold at most [`MERGE_BUDGET_BYTES`] of upstream
    /// bytes in all (`budget`, one permit a byte, taken for the page's
    /// `Content-Length`, or the largest page when it gives none, until the merged
    /// page is sent): a list past it waits for one to finish.
    pub(crate) async fn merged(
        self,
        answer: http::Response<ResponseBody>,
        spooled: &SpooledObjects,
        spool: &Spool,
        budget: &std::sync::Arc<tokio::sync::Semaphore>,
    ) -> Result<http::Response<ResponseBody>, PassError> {
        if answer.status() != 200 {
            return Ok(answer);
        }
        let declared = (answer.headers().get(http::header::CONTENT_LENGTH))
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        let budgeted = declared.unwrap_or(MAX_PAGE_BYTES).clamp(1, MAX_PAGE_BYTES);
        // Held until the merged page is sent: what it holds is the page's.
        let held = (budget.clone())
            .acquire_many_owned(budgeted as u32)
            .await
            .expect("the budget is never closed");
        let (parts, mut body) = answer.into_parts();
        let mut read = Vec::with_capacity(declared.unwrap_or(0).min(MAX_PAGE_BYTES));
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| PassError::Unreachable {
                upstream: "the upstream".into(),
                reason: format!("its list page could not be read: {e}"),
            })?;
            if let Ok(data) = frame.into_data() {
                read.extend_from_slice(&data);
            }
            if read.len() > budgeted {
                return Err(PassError::Unreachable {
                    upstream: "the upstream".into(),
                    reason: format!(
                        "its list page is over {budgeted} bytes (its Content-Length, or the \
                         {MAX_PAGE_BYTES} bytes the relay merges)"
                    ),
                });
            }
        }
        let body = bytes::Bytes::from(read);
        let page = self.page(parts, body, spooled, spool).await;
        Ok(page.map(|body| crate::passthrough::holding(body, held)))
    }

    async fn page(
        self,
        parts: http::response::Parts,
        body: bytes::Bytes,
        spooled: &SpooledObjects,
        spool: &Spool,
    ) -> http::Response<ResponseBody> {
        let api = self.merging.api;
        let Some(page) = UpstreamPage::parse(api, &body) else {
            // Not a page the relay can read: as it came.
            let mut response = http::Response::from_parts(parts, whole(body));
            response.headers_mut().remove(http::header::CONTENT_LENGTH);
            return response;
        };
        drop(body);
        let last = page.last_key();
        let covered = Covered {
            asked: &self.asked,
            resume: &self.resume,
            upstream_last: page.truncated.then_some(last.as_deref()).flatten(),
        };
        let spooled_page = covered.spooled(spooled, spool, &self.merging).await;
        let entries = merge(page.entries, &self.resume, spooled_page);
        let (taken, token) = cut(entries, page.truncated, last, self.asked.max);
        let reply = render(api, &self.merging, &self.asked, &taken, token);
        let body = reply.body.clone();
        reply.into_response(whole(body))
    }
}

/// The upstream's query: the client's `raw` one, resuming where the relay's token
/// says, one entry longer.
fn upstream_query(api: Api, raw: &str, asked: &ListQuery, resume: &Resume) -> String {
    let mut pairs: Vec<String> = (raw.split('&'))
        .filter(|pair| !pair.is_empty())
        .filter(|pair| !replaced(api, pair.split('=').next().unwrap_or("")))
        .map(str::to_string)
        .collect();
    let upstream_max = (asked.max + 1).min(MAX_LIST_RESULTS);
    match api {
        Api::Json => {
            pairs.push(format!("maxResults={upstream_max}"));
            let first = match (resume.first(), asked.from.clone()) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if let Some(first) = first {
                pairs.push(format!("startOffset={}", encode_component(&first)));
            }
        }
        Api::Xml => {
            pairs.push(format!("max-keys={upstream_max}"));
            if let Some(after) = &resume.after {
                pairs.push(format!("start-after={}", encode_component(after)));
            }
        }
    }
    pairs.join("&")
}

/// An upstream list page: its entries in order, and whether it has more.
struct UpstreamPage {
    entries: Vec<Entry>,
    truncated: bool,
}

impl UpstreamPage {
    fn parse(api: Api, body: &[u8]) -> Option<Self> {
        match api {
            Api::Json => Self::json(body),
            Api::Xml => Self::xml(std::str::from_utf8(body).ok()?),
        }
    }

    fn json(body: &[u8]) -> Option<Self> {
        let mut page: Value = serde_json::from_slice(body).ok()?;
        let mut entries = Vec::new();
        let items = match page.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        for item in items {
            let name = item.get("name")?.as_str()?.to_string();
            entries.push(Entry::Object {
                name,
                rendered: Rendered::Json(item),
            });
        }
        for prefix in (page.get("prefixes").and_then(Value::as_array))
            .into_iter()
            .flatten()
        {
            entries.push(Entry::Prefix(prefix.as_str()?.to_string()));
        }
        let truncated = page.get("nextPageToken").is_some_and(|t| !t.is_null());
        Some(UpstreamPage { entries, truncated })
    }

    fn xml(body: &str) -> Option<Self> {
        if !body.contains("<ListBucketResult") {
            return None;
        }
        let mut entries = Vec::new();
        for contents in elements(body, "Contents") {
            let name = unescape(elements(contents, "Key").next()?);
            entries.push(Entry::Object {
                name,
                rendered: Rendered::Xml(format!("<Contents>{contents}</Contents>")),
            });
        }
        for common in elements(body, "CommonPrefixes") {
            entries.push(Entry::Prefix(unescape(elements(common, "Prefix").next()?)));
        }
        let truncated = elements(body, "IsTruncated").next() == Some("true");
        Some(UpstreamPage { entries, truncated })
    }

    /// The last entry's key: where the upstream's page ends.
    fn last_key(&self) -> Option<String> {
        (self.entries.iter())
            .map(|entry| entry.key().0)
            .max()
            .map(str::to_string)
    }
}

/// The contents of each `<tag>...</tag>` in `xml`, in order (not nested).
fn elements<'a>(xml: &'a str, tag: &str) -> impl Iterator<Item = &'a str> + 'a {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut rest = xml;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let len = rest[start..].find(&close)?;
        let found = &rest[start..start + len];
        rest = &rest[start + len + close.len()..];
        Some(found)
    })
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Which spooled names a page covers: those the client's query admits, past its
/// resume point, up to the upstream page's last entry when the upstream has more.
struct Covered<'a> {
    asked: &'a ListQuery,
    resume: &'a Resume,
    /// The upstream page's last key, when it says there is more.
    upstream_last: Option<&'a str>,
}

impl Covered<'_> {
    /// The spooled entries of the page, in order: at most one more key than the
    /// page holds, each name visited once and each common prefix folded at its
    /// first name (the walk goes on past it): O((page + skipped) log n), whatever
    /// the spool holds. Names a glob or an end offset leave out are skipped one by
    /// one.
    async fn spooled(
        &self,
        spooled: &SpooledObjects,
        spool: &Spool,
        merging: &Merging,
    ) -> Vec<Entry> {
        let asked = self.asked;
        let start = [
            Some(asked.prefix.clone()),
            self.resume.first(),
            asked.from.clone(),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or_default();
        let mut found = Vec::new();
        let mut keys = 0;
        spooled.walk(spool, &start, |visited| {
            let name = visited.record.name.as_str();
            if !name.starts_with(asked.prefix.as_str())
                || asked.before.as_deref().is_some_and(|before| name >= before)
                || keys > asked.max
            {
                return Walk::Stop;
            }
            if !wanted(name, asked, self.resume) {
                return Walk::Next;
            }
            let folded = common_prefix(name, asked);
            let key = folded.as_deref().unwrap_or(name);
            // Past the upstream's page: on a later one.
            if self.upstream_last.is_some_and(|last| key > last) {
                return Walk::Stop;
            }
            keys += 1;
            let object = || Found::Object {
                record: visited.record.clone(),
                seq: visited.seq,
                digested: visited.digested,
            };
            match folded {
                Some(prefix) => {
                    if asked.include_trailing_delimiter && prefix == name {
                        found.push(object());
                    }
                    found.push(Found::Prefix(prefix.clone()));
                    Walk::Past(prefix)
                }
                None => {
                    found.push(object());
                    Walk::Next
                }
            }
        });
        let mut entries = Vec::with_capacity(found.len());
        for found in found {
            match found {
                Found::Prefix(prefix) => entries.push(Entry::Prefix(prefix)),
                Found::Object {
                    mut record,
                    seq,
                    digested,
                } => {
                    // An earlier run's entry whose MD5 is not read yet: read now
                    // (one page's worth at most); gone meanwhile, it is left out.
                    if !digested {
                        let Some(md5) = spooled.digest(spool, seq).await else {
                            continue;
                        };
                        record.md5 = md5;
                    }
                    let rendered = rendered(merging, &record);
                    let name = record.name;
                    entries.push(Entry::Object { name, rendered });
                }
            }
        }
        entries
    }
}

/// What a walk of the spooled names found for a page, before rendering.
enum Found {
    Prefix(String),
    Object {
        record: ObjectRecord,
        seq: u64,
        digested: bool,
    },
}

/// The upstream's entries (those past the resume point) and the spooled ones the
/// page covers (`spooled`, from [`Covered::spooled`]), in order, each once: a
/// name both spooled and listed upstream (just delivered) is the upstream's.
/// O(page log page).
fn merge(upstream: Vec<Entry>, resume: &Resume, spooled: Vec<Entry>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = (upstream.into_iter())
        .filter(|entry| !resume.skips(entry.key().0))
        .collect();
    let upstream_keys: std::collections::BTreeSet<(String, u8)> = (entries.iter())
        .map(|entry| (entry.key().0.to_string(), entry.key().1))
        .collect();
    let listed_names: std::collections::BTreeSet<&str> = (upstream_keys.iter())
        .map(|(key, _)| key.as_str())
        .collect();
    let mut added = Vec::new();
    for entry in spooled {
        let (key, kind) = entry.key();
        let known = match entry {
            // A prefix the upstream lists, as a prefix or as a name, is there.
            Entry::Prefix(_) => listed_names.contains(key),
            Entry::Object { .. } => upstream_keys.contains(&(key.to_string(), kind)),
        };
        if !known {
            added.push(entry);
        }
    }
    entries.extend(added);
    entries.sort_by(|a, b| a.key().cmp(&b.key()));
    entries
}

/// A spooled object as the page's API lists it: the resource the relay answered
/// its upload with (JSON), or its `<Contents>` (XML).
fn rendered(merging: &Merging, record: &ObjectRecord) -> Rendered {
    match merging.api {
        Api::Json => Rendered::Json(crate::answer::resource(
            &merging.base,
            &merging.bucket,
            record,
        )),
        Api::Xml => Rendered::Xml(
            XmlContents {
                name: &record.name,
                generation: record.generation,
                metageneration: 1,
                last_modified_unix_ms: record.created_unix_ms,
                etag: &record.xml_etag(),
                size: record.size,
            }
            .render(),
        ),
    }
}

/// The first `max` entries (an object and the prefix of the same name count as
/// one), and the token of the page after them, when there is one.
fn cut(
    entries: Vec<Entry>,
    truncated: bool,
    upstream_last: Option<String>,
    max: usize,
) -> (Vec<Entry>, Option<String>) {
    let mut taken: Vec<Entry> = Vec::new();
    let mut count = 0;
    let mut more = false;
    for entry in entries {
        let same = taken
            .last()
            .is_some_and(|last| last.key().0 == entry.key().0);
        if !same {
            if count == max {
                more = true;
                break;
            }
            count += 1;
        }
        taken.push(entry);
    }
    let last = taken.last().map(|entry| entry.key().0.to_string());
    let token = match (more || truncated, last) {
        (false, _) => None,
        (true, Some(last)) => Some(last),
        (true, None) => upstream_last,
    };
    (
        taken,
        token.map(|after| URL_SAFE_NO_PAD.encode(after.as_bytes())),
    )
}

/// The page in `api`'s shape.
fn render(
    api: Api,
    merging: &Merging,
    asked: &ListQuery,
    taken: &[Entry],
    token: Option<String>,
) -> Reply {
    let objects = (taken.iter()).filter_map(|entry| match entry {
        Entry::Object { rendered, .. } => Some(rendered),
        Entry::Prefix(_) => None,
    });
    let prefixes: Vec<&str> = (taken.iter())
        .filter_map(|entry| match entry {
            Entry::Prefix(p) => Some(p.as_str()),
            Entry::Object { .. } => None,
        })
        .collect();
    match api {
        Api::Json => {
            let items: Vec<Value> = objects
                .filter_map(|r| match r {
                    Rendered::Json(v) => Some(v.clone()),
                    Rendered::Xml(_) => None,
                })
                .collect();
            let mut body = json!({ "kind": "storage#objects" });
            if !items.is_empty() {
                body["items"] = Value::Array(items);
            }
            if !prefixes.is_empty() {
                body["prefixes"] = json!(prefixes);
            }
            if let Some(token) = token {
                body["nextPageToken"] = Value::String(token);
            }
            Reply::json(200, &body)
        }
        Api::Xml => {
            let contents: Vec<&str> = (objects.into_iter())
                .filter_map(|r| match r {
                    Rendered::Xml(contents) => Some(contents.as_str()),
                    Rendered::Json(_) => None,
                })
                .collect();
            let xml = xml_list_page(
                &merging.bucket,
                asked,
                token.as_deref(),
                &contents,
                &prefixes,
            );
            Reply::xml(200, xml)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resuming_after_a_common_prefix_skips_the_names_under_it() {
        let asked = ListQuery {
            prefix: "p/".into(),
            delimiter: Some("/".into()),
            max: 2,
            after: Some("p/d/".into()),
            ..ListQuery::default()
        };
        let past = common_prefix("p/d/", &asked);
        assert_eq!(past.as_deref(), Some("p/d/"));
        let resume = Resume {
            after: asked.after.clone(),
            past_prefix: past,
        };
        assert!(resume.skips("p/d/9"));
        assert!(!resume.skips("p/e"));
        assert_eq!(resume.first().as_deref(), Some("p/d0"));
    }

    #[test]
    fn a_page_is_cut_at_its_size_and_resumes_after_its_last_entry() {
        let object = |name: &str| Entry::Object {
            name: name.into(),
            rendered: Rendered::Json(json!({ "name": name })),
        };
        let entries = vec![object("a"), Entry::Prefix("b/".into()), object("c")];
        let (taken, token) = cut(entries.clone(), false, None, 2);
        assert_eq!(taken.len(), 2);
        assert_eq!(
            token.as_deref(),
            Some(URL_SAFE_NO_PAD.encode("b/").as_str())
        );
        let (taken, token) = cut(entries, false, None, 3);
        assert_eq!((taken.len(), token), (3, None));
    }

    #[test]
    fn xml_pages_are_read_by_their_elements() {
        let xml = "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a&amp;b</Key>\
                   <Size>1</Size></Contents><CommonPrefixes><Prefix>c/</Prefix></CommonPrefixes>\
                   </ListBucketResult>";
        let page = UpstreamPage::xml(xml).unwrap();
        assert!(page.truncated);
        let keys: Vec<&str> = page.entries.iter().map(|e| e.key().0).collect();
        assert_eq!(keys, ["a&b", "c/"]);
    }
}
