//! Listing objects: the request's parameters in either API (JSON `maxResults`,
//! `pageToken`, `startOffset`, `endOffset`, `matchGlob`, `includeTrailingDelimiter`;
//! XML `max-keys`, `continuation-token`, `start-after`; both `prefix` and
//! `delimiter`), one page of results, and the page as each API answers it. Page
//! tokens are the URL-safe base64 of the name the next page resumes after.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::wire::encoding::{rfc3339_millis, xml_escape};
use crate::wire::error::Rejection;
use crate::wire::object::{ObjectMeta, ObjectRecord};
use crate::wire::reply::Reply;
use crate::wire::route::{Api, Query};

/// A list request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only names starting with this.
    pub prefix: String,
    /// Fold names into common prefixes up to this, when set.
    pub delimiter: Option<String>,
    /// Most entries (objects plus prefixes) on the page.
    pub max: usize,
    /// Resume after this name (exclusive): a page token or XML `start-after`.
    pub after: Option<String>,
    /// Start at this name (inclusive): JSON `startOffset`, without a page token.
    pub from: Option<String>,
    /// Only names before this one (exclusive): JSON `endOffset`.
    pub before: Option<String>,
    /// Only names this glob matches: JSON `matchGlob`.
    pub glob: Option<NameGlob>,
    /// With a delimiter, an object whose name (past the prefix) ends with its only
    /// delimiter is listed among the objects as well as the prefixes: JSON
    /// `includeTrailingDelimiter=true` (a "folder" object `a/` beside the prefix
    /// `a/`).
    pub include_trailing_delimiter: bool,
    /// Every version is listed, noncurrent ones too: JSON `versions=true`.
    pub versions: bool,
    /// With [`versions`](Self::versions) and a page token: resume within
    /// [`after`](Self::after)'s name after this generation (`i64::MAX`, past all
    /// of it, otherwise).
    pub after_generation: i64,
}

/// A list's `matchGlob`, as Cloud Storage reads it: `*` and `?` within one
/// segment of the name (never across `/`), `**` across segments (`**/` also none),
/// `[abc]`, `[!abc]`, `[a-z]`, `{a,b}`, and `\` escaping the next character.
#[derive(Debug, Clone)]
pub struct NameGlob {
    pattern: String,
    matcher: globset::GlobMatcher,
}

impl NameGlob {
    /// The glob `pattern`; 400 naming the pattern when it is not one.
    pub fn parse(pattern: &str) -> Result<Self, Rejection> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .empty_alternates(true)
            .build()
            .map_err(|e| Rejection::invalid(format!("Invalid matchGlob {pattern:?}: {e}")))?;
        Ok(NameGlob {
            pattern: pattern.to_string(),
            matcher: glob.compile_matcher(),
        })
    }

    /// Whether the glob matches all of `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }

    /// The pattern as sent.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

impl PartialEq for NameGlob {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl Eq for NameGlob {}

impl ListQuery {
    /// The list request in `query`, with at most `max_limit` entries a page; 400 when
    /// the page size or token is not valid.
    pub fn parse(api: Api, query: &Query, max_limit: usize) -> Result<Self, Rejection> {
        let (max_key, token_key, after_key) = match api {
            Api::Json => ("maxResults", "pageToken", "startOffset"),
            Api::Xml => ("max-keys", "continuation-token", "start-after"),
        };
        let max = match query.get(max_key).map(str::parse::<usize>) {
            None => max_limit,
            Some(Ok(n)) => n.clamp(1, max_limit),
            Some(Err(_)) => return Err(Rejection::invalid(format!("Invalid {max_key}."))),
        };
        let versions = api == Api::Json && query.flag("versions")?;
        let (resume, after_generation) = match query.get(token_key) {
            Some(token) => match decode_token(token, versions) {
                Some((after, generation)) => (Some(after), generation),
                None => return Err(Rejection::invalid(format!("Invalid {token_key}."))),
            },
            None => (None, i64::MAX),
        };
        // A page token resumes after a name; JSON `startOffset` starts at a name
        // (inclusive), XML `start-after` after one.
        let (after, from) = match (resume, api) {
            (Some(resume), _) => (Some(resume), None),
            (None, Api::Json) => (None, query.get(after_key).map(str::to_string)),
            (None, Api::Xml) => (query.get(after_key).map(str::to_string), None),
        };
        // An empty value is no value, as the service reads it.
        let json = |key| {
            (api == Api::Json)
                .then(|| query.get(key))
                .flatten()
                .filter(|v: &&str| !v.is_empty())
        };
        let include_trailing_delimiter =
            api == Api::Json && query.flag("includeTrailingDelimiter")?;
        Ok(ListQuery {
            prefix: query.get("prefix").unwrap_or("").to_string(),
            delimiter: query.get("delimiter").map(str::to_string),
            max,
            after,
            from,
            before: json("endOffset").map(str::to_string),
            glob: json("matchGlob").map(NameGlob::parse).transpose()?,
            include_trailing_delimiter,
            versions,
            after_generation,
        })
    }
}

/// The name (and, in a listing of versions, the generation) a page token resumes
/// after.
fn decode_token(token: &str, versions: bool) -> Option<(String, i64)> {
    let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    if !versions {
        return Some((text, i64::MAX));
    }
    let (generation, name) = text.split_once(':')?;
    Some((name.to_string(), generation.parse().ok()?))
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// The objects, in name order, each with what metadata calls changed on it.
    pub objects: Vec<(ObjectRecord, Option<ObjectMeta>)>,
    /// The common prefixes, in order.
    pub prefixes: Vec<String>,
    /// Where the next page resumes (exclusive), when there is one.
    pub resume_after: Option<String>,
    /// In a listing of versions, the generation of `resume_after`'s name the next
    /// page resumes after.
    pub resume_generation: Option<i64>,
}

impl ListPage {
    /// The page as `api` answers `query` on `bucket` (object links under `base`).
    pub fn reply(&self, api: Api, base: &str, bucket: &str, query: &ListQuery) -> Reply {
        let token = self.resume_after.as_ref().map(|after| {
            let text = match self.resume_generation {
                Some(generation) => format!("{generation}:{after}"),
                None => after.clone(),
            };
            URL_SAFE_NO_PAD.encode(text.as_bytes())
        });
        match api {
            Api::Json => Reply::json(200, &self.json(base, bucket, token)),
            Api::Xml => Reply::xml(200, self.xml(bucket, query, token)),
        }
    }

    fn json(&self, base: &str, bucket: &str, token: Option<String>) -> Value {
        let mut body = json!({ "kind": "storage#objects" });
        if !self.objects.is_empty() {
            let items: Vec<Value> = self
                .objects
                .iter()
                .map(|(r, meta)| r.json_resource_with(base, bucket, meta.as_ref()))
                .collect();
            body["items"] = Value::Array(items);
        }
        if !self.prefixes.is_empty() {
            body["prefixes"] = json!(self.prefixes);
        }
        if let Some(token) = token {
            body["nextPageToken"] = Value::String(token);
        }
        body
    }

    /// `ListBucketResult`, as the XML API's `list-type=2` gives it.
    fn xml(&self, bucket: &str, query: &ListQuery, token: Option<String>) -> String {
        let contents: Vec<String> = (self.objects.iter())
            .map(|(r, meta)| {
                XmlContents {
                    name: &r.name,
                    generation: r.generation,
                    metageneration: meta.as_ref().map_or(1, |m| m.metageneration),
                    last_modified_unix_ms: r.created_unix_ms,
                    etag: &r.xml_etag(),
                    size: r.size,
                }
                .render()
            })
            .collect();
        xml_list_page(bucket, query, token.as_deref(), &contents, &self.prefixes)
    }
}

/// One object of an XML list page, as `<Contents>` shows it.
#[derive(Debug, Clone, Copy)]
pub struct XmlContents<'a> {
    /// The object's name.
    pub name: &'a str,
    /// Its generation.
    pub generation: i64,
    /// Its metageneration.
    pub metageneration: i64,
    /// `LastModified`, milliseconds since the Unix epoch.
    pub last_modified_unix_ms: u64,
    /// Its XML ETag, quoted.
    pub etag: &'a str,
    /// Its length in bytes.
    pub size: u64,
}

impl XmlContents<'_> {
    /// The `<Contents>` element.
    pub fn render(&self) -> String {
        format!(
            "<Contents><Key>{}</Key><Generation>{}</Generation><MetaGeneration>{}</MetaGeneration><LastModified>{}</LastModified><ETag>{}</ETag><Size>{}</Size></Contents>",
            xml_escape(self.name),
            self.generation,
            self.metageneration,
            rfc3339_millis(self.last_modified_unix_ms),
            xml_escape(self.etag),
            self.size
        )
    }
}

/// `ListBucketResult`, as the XML API's `list-type=2` gives a page of `query` on
/// `bucket`: `contents` (each a rendered [`XmlContents`]), then the common
/// `prefixes`, and the token of the next page when there is one. The fake's own
/// lists and a relay's (from another store, or merged with its spool) are written
/// by this one function.
pub fn xml_list_page(
    bucket: &str,
    query: &ListQuery,
    token: Option<&str>,
    contents: &[impl AsRef<str>],
    prefixes: &[impl AsRef<str>],
) -> String {
    let esc = xml_escape;
    let mut xml = String::from("<?xml version='1.0' encoding='UTF-8'?>");
    xml.push_str("<ListBucketResult xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\">");
    let _ = write!(
        xml,
        "<Name>{}</Name><Prefix>{}</Prefix><KeyCount>{}</KeyCount><MaxKeys>{}</MaxKeys>",
        esc(bucket),
        esc(&query.prefix),
        contents.len() + prefixes.len(),
        query.max
    );
    if let Some(d) = &query.delimiter {
        let _ = write!(xml, "<Delimiter>{}</Delimiter>", esc(d));
    }
    let _ = write!(xml, "<IsTruncated>{}</IsTruncated>", token.is_some());
    if let Some(token) = token {
        let _ = write!(
            xml,
            "<NextContinuationToken>{token}</NextContinuationToken>"
        );
    }
    for element in contents {
        xml.push_str(element.as_ref());
    }
    for p in prefixes {
        let prefix = esc(p.as_ref());
        let _ = write!(
            xml,
            "<CommonPrefixes><Prefix>{prefix}</Prefix></CommonPrefixes>"
        );
    }
    xml.push_str("</ListBucketResult>");
    xml
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parameters_differ_by_api() {
        let json = Query::parse(Some("maxResults=5000&startOffset=b&prefix=p/"));
        let q = ListQuery::parse(Api::Json, &json, 1000).unwrap();
        assert_eq!((q.max, q.from.as_deref(), q.after), (1000, Some("b"), None));
        assert_eq!(q.prefix, "p/");
        let xml = Query::parse(Some("max-keys=0&start-after=b&delimiter=/"));
        let q = ListQuery::parse(Api::Xml, &xml, 1000).unwrap();
        assert_eq!((q.max, q.after.as_deref(), q.from), (1, Some("b"), None));
        assert_eq!(q.delimiter.as_deref(), Some("/"));
        let token = Query::parse(Some("pageToken=YQ&startOffset=z"));
        let q = ListQuery::parse(Api::Json, &token, 10).unwrap();
        assert_eq!((q.after.as_deref(), q.from), (Some("a"), None));
        assert!(ListQuery::parse(Api::Json, &Query::parse(Some("pageToken=*")), 10).is_err());
        assert!(ListQuery::parse(Api::Xml, &Query::parse(Some("max-keys=x")), 10).is_err());
    }

    #[test]
    fn a_listing_of_versions_resumes_after_a_generation_of_a_name() {
        let page = ListPage {
            resume_after: Some("a:b".into()),
            resume_generation: Some(7),
            ..ListPage::default()
        };
        let reply = page.reply(Api::Json, "http://h", "b", &ListQuery::default());
        let body: Value = serde_json::from_slice(&reply.body).unwrap();
        let token = body["nextPageToken"].as_str().unwrap();
        let next = Query::parse(Some(&format!("versions=true&pageToken={token}")));
        let q = ListQuery::parse(Api::Json, &next, 10).unwrap();
        assert_eq!(
            (q.versions, q.after.as_deref(), q.after_generation),
            (true, Some("a:b"), 7)
        );
        // Without versions the same token is a name; a name token is no version token.
        let plain = Query::parse(Some(&format!("pageToken={token}")));
        let q = ListQuery::parse(Api::Json, &plain, 10).unwrap();
        assert_eq!(
            (q.after.as_deref(), q.after_generation),
            (Some("7:a:b"), i64::MAX)
        );
        let name_only = Query::parse(Some("versions=true&pageToken=YQ"));
        assert!(ListQuery::parse(Api::Json, &name_only, 10).is_err());
    }

    #[test]
    fn a_truncated_page_carries_a_token_to_resume_after_its_last_name() {
        let page = ListPage {
            prefixes: vec!["a/".into()],
            resume_after: Some("a/".into()),
            ..ListPage::default()
        };
        let query = ListQuery {
            max: 1,
            ..ListQuery::default()
        };
        let json = page.reply(Api::Json, "http://h", "b", &query);
        let json: Value = serde_json::from_slice(&json.body).unwrap();
        assert_eq!(
            json,
            json!({ "kind": "storage#objects", "nextPageToken": "YS8", "prefixes": ["a/"] })
        );
        let xml = page.reply(Api::Xml, "http://h", "b", &query);
        let xml = std::str::from_utf8(&xml.body).unwrap();
        assert!(xml.contains(
            "<IsTruncated>true</IsTruncated><NextContinuationToken>YS8</NextContinuationToken>"
        ));
    }
}
