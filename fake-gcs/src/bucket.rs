//! What a bucket holds and the rules for changing it: one live generation per name,
//! generations that only grow, preconditions checked atomically with the write, and
//! listing in name order with resumable pages.
//!
//! With `versioning.enabled` (Cloud Storage's Object Versioning), a live object
//! that is replaced or deleted (without naming its generation) stays as a
//! noncurrent version: the same generation, with the time it stopped being live
//! (`timeDeleted`). Noncurrent versions are read, copied, composed, listed
//! (`versions=true`: name order, then generation ascending) and deleted by
//! generation; naming the live generation in a delete deletes it for good. A
//! bucket is empty only without live objects and noncurrent versions. Without
//! versioning a replaced object is gone; versions kept while it was on stay when
//! it is turned off, as in Cloud Storage.
//!
//! Per object the fake keeps 88 bytes plus the name (its digests, size,
//! generation, creation time, component count; a pointer to its content type and
//! attributes when they are not the defaults, and to what metadata calls changed
//! once one has) and, only when `keep_bytes` is set or the object was placed with
//! `FakeGcs::insert_object`, the bytes themselves. A noncurrent version costs the
//! same plus 8 bytes (its time of deletion), and its name once per name: no
//! version keeps bytes a live object would not have kept. A bucket keeps its
//! metadata ([`BucketMeta`]) and its managed folders ([`ManagedFolders`]) beside
//! its objects; a bucket with a managed folder is not empty.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::ops::Bound;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::metadata::retention::{self, Retention};
use crate::metadata::{BucketMeta, DEFAULT_PROJECT, ManagedFolders, ObjectChanges, ObjectEdit};
use crate::wire::{
    DEFAULT_CONTENT_TYPE, ListPage, ListQuery, ObjectAttributes, ObjectMeta, ObjectRecord,
    Rejection, rfc3339_millis,
};

/// A stored object: its record without the name (the bucket's map key already holds
/// it, and a long replay keeps millions), and the bytes when the fake keeps them.
#[derive(Debug, Clone)]
pub(crate) struct StoredObject {
    pub(crate) generation: i64,
    size: u64,
    crc32c: u32,
    pub(crate) component_count: Option<NonZeroU32>,
    md5: [u8; 16],
    created_unix_ms: u64,
    /// The content type and attributes, when either is not the default.
    described: Option<Box<Described>>,
    pub(crate) bytes: Option<Bytes>,
}

/// What an object was described with, when it is more than the default content
/// type and no attributes, or metadata calls changed it.
#[derive(Debug, Clone)]
struct Described {
    content_type: Cow<'static, str>,
    attributes: ObjectAttributes,
    changes: Option<Box<ObjectChanges>>,
}

impl StoredObject {
    /// Splits `record` into its name (the map key) and what is stored under it.
    pub(crate) fn new(record: ObjectRecord, bytes: Option<Bytes>) -> (String, Self) {
        let ObjectRecord {
            name,
            generation,
            size,
            crc32c,
            md5,
            created_unix_ms,
            content_type,
            attributes,
            component_count,
        } = record;
        let described = match (content_type, attributes) {
            (Cow::Borrowed(DEFAULT_CONTENT_TYPE), None) => None,
            (content_type, attributes) => Some(Box::new(Described {
                content_type,
                attributes: attributes.map(|a| *a).unwrap_or_default(),
                changes: None,
            })),
        };
        let stored = Self {
            generation,
            size,
            crc32c,
            component_count,
            md5,
            created_unix_ms,
            described,
            bytes,
        };
        (name, stored)
    }

    /// Its length in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// What metadata calls changed, if any has.
    pub(crate) fn changes(&self) -> Option<&ObjectChanges> {
        self.described.as_ref()?.changes.as_deref()
    }

    /// What metadata calls changed on the resource (its metageneration, ...).
    pub(crate) fn meta(&self) -> Option<&ObjectMeta> {
        self.changes().map(|c| &c.meta)
    }

    /// Its metageneration: 1 until a metadata call changes it.
    pub(crate) fn metageneration(&self) -> i64 {
        self.meta().map_or(1, |m| m.metageneration)
    }

    /// Its generation and metageneration, for preconditions.
    pub(crate) fn live(&self) -> (i64, i64) {
        (self.generation, self.metageneration())
    }

    /// Its editable metadata, for a patch or update to change and
    /// [`set_edit`](Self::set_edit) to put back.
    pub(crate) fn edit(&self) -> ObjectEdit {
        let record = self.record("");
        ObjectEdit {
            content_type: record.content_type,
            attributes: record.attributes.map(|a| *a).unwrap_or_default(),
            changes: self.changes().cloned().unwrap_or_else(|| ObjectChanges {
                meta: ObjectMeta {
                    metageneration: 1,
                    updated_unix_ms: self.created_unix_ms,
                    ..ObjectMeta::default()
                },
                acl: None,
            }),
        }
    }

    /// Puts back metadata [`edit`](Self::edit) took out.
    pub(crate) fn set_edit(&mut self, edit: ObjectEdit) {
        self.described = Some(Box::new(Described {
            content_type: edit.content_type,
            attributes: edit.attributes,
            changes: Some(Box::new(edit.changes)),
        }));
    }

    /// Sets `fields` of its resource (a hold, a retention expiration) without
    /// counting a metageneration: what the bucket gives an object as it is written.
    pub(crate) fn add_fields(&mut self, fields: Map<String, Value>) {
        if fields.is_empty() {
            return;
        }
        let mut edit = self.edit();
        edit.changes.meta.extra.extend(fields);
        self.set_edit(edit);
    }

    /// Its `retentionExpirationTime`, when it has one, in milliseconds since the
    /// Unix epoch.
    fn retention_expires_ms(&self) -> Option<u64> {
        let text = self
            .meta()?
            .extra
            .get("retentionExpirationTime")?
            .as_str()?;
        let at = humantime::parse_rfc3339_weak(text).ok()?;
        let since = at.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(since.as_millis() as u64)
    }

    /// Its object retention, when it has one.
    pub(crate) fn retention(&self) -> Option<Retention> {
        Retention::of(&self.meta()?.extra).ok().flatten()
    }

    /// Whether the resource field `key` is `true` (a hold).
    pub(crate) fn flag(&self, key: &str) -> bool {
        self.meta()
            .and_then(|m| m.extra.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The record of this object, stored under `name`.
    pub(crate) fn record(&self, name: &str) -> ObjectRecord {
        let (content_type, attributes) = match &self.described {
            None => (Cow::Borrowed(DEFAULT_CONTENT_TYPE), None),
            Some(d) => (d.content_type.clone(), d.attributes.clone().boxed()),
        };
        ObjectRecord {
            name: name.to_string(),
            generation: self.generation,
            size: self.size,
            crc32c: self.crc32c,
            md5: self.md5,
            created_unix_ms: self.created_unix_ms,
            content_type,
            attributes,
            component_count: self.component_count,
        }
    }
}

/// The objects a bucket held, taken out of the fake at the end of a run
/// ([`FakeGcs::take_objects`](crate::FakeGcs::take_objects)): the fake's own map,
/// moved rather than copied, whose records are made one at a time as they are read.
/// A long replay ends with millions of objects; a list of their records beside the
/// map would hold each one twice at the run's most crowded moment.
#[derive(Debug, Default)]
pub struct Objects {
    by_name: BTreeMap<String, StoredObject>,
}

impl Objects {
    pub(crate) fn new(by_name: BTreeMap<String, StoredObject>) -> Self {
        Self { by_name }
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Each object's record, in name order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = ObjectRecord> + '_ {
        self.by_name.iter().map(|(name, o)| o.record(name))
    }

    /// The record of the object named `name`.
    pub fn get(&self, name: &str) -> Option<ObjectRecord> {
        self.by_name.get(name).map(|o| o.record(name))
    }
}

/// A version that is no longer live: the object as it was, and when it stopped
/// being live.
#[derive(Debug, Clone)]
pub(crate) struct Noncurrent {
    pub(crate) object: StoredObject,
    deleted_unix_ms: u64,
}

/// One version of an object, live or noncurrent, as a read finds it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Version<'a> {
    pub(crate) object: &'a StoredObject,
    /// When it stopped being live; `None` for the live version.
    pub(crate) deleted_unix_ms: Option<u64>,
}

impl Version<'_> {
    /// What its resource shows beyond its record: what metadata calls changed,
    /// and for a noncurrent version its `timeDeleted`.
    pub(crate) fn meta(&self) -> Option<ObjectMeta> {
        let Some(deleted) = self.deleted_unix_ms else {
            return self.object.meta().cloned();
        };
        let mut meta = self.object.edit().changes.meta;
        let time = Value::String(rfc3339_millis(deleted));
        meta.extra.insert("timeDeleted".into(), time);
        Some(meta)
    }
}

/// One bucket: its live objects, its noncurrent versions (by name, generation
/// ascending) and its metadata.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub(crate) created_unix_ms: u64,
    pub(crate) objects: BTreeMap<String, StoredObject>,
    noncurrent: BTreeMap<String, Vec<Noncurrent>>,
    pub(crate) meta: BucketMeta,
    pub(crate) folders: ManagedFolders,
}

/// Where a listing resumes: after this name and, within it, after this generation
/// (`i64::MAX`: after every version of it).
pub(crate) type After<'a> = (&'a str, i64);

/// Sorts after every name that starts with a given prefix (U+10FFFF is the largest
/// scalar value), so a page can resume after a whole common prefix.
const AFTER_PREFIX: char = '\u{10FFFF}';

impl Bucket {
    /// A bucket created at `created_unix_ms`, empty, in the default project.
    pub(crate) fn new(created_unix_ms: u64) -> Self {
        Self::in_project(DEFAULT_PROJECT, created_unix_ms)
    }

    /// A bucket created at `created_unix_ms` in `project`, empty.
    pub(crate) fn in_project(project: &str, created_unix_ms: u64) -> Self {
        Self {
            created_unix_ms,
            objects: BTreeMap::new(),
            noncurrent: BTreeMap::new(),
            meta: BucketMeta::new(project, created_unix_ms),
            folders: ManagedFolders::default(),
        }
    }

    /// Whether Object Versioning is on (`versioning.enabled`).
    pub(crate) fn versioning(&self) -> bool {
        let versioning = self.meta.fields.get("versioning");
        versioning
            .and_then(|v| v.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// Whether object retention is enabled (it was created with
    /// `enableObjectRetention=true`).
    pub(crate) fn object_retention(&self) -> bool {
        self.meta.fields.contains_key(retention::BUCKET_FIELD)
    }

    /// 400 when the resource fields `given` to a new object (an upload's) hold a
    /// retention that is not one, or any while object retention is not enabled.
    pub(crate) fn check_new_retention(&self, given: &Map<String, Value>) -> Result<(), Rejection> {
        let given = Retention::of(given)?;
        retention::check_change(self.object_retention(), None, given, false)
    }

    /// Whether it holds nothing: no live object, no noncurrent version, no
    /// managed folder.
    pub(crate) fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.noncurrent.is_empty() && self.folders.is_empty()
    }

    /// Whether an object (live or noncurrent) has a name starting with `prefix`.
    pub(crate) fn holds_under(&self, prefix: &str) -> bool {
        let from = (Bound::Included(prefix), Bound::Unbounded);
        let under = |name: Option<&String>| name.is_some_and(|n| n.starts_with(prefix));
        under(self.objects.range::<str, _>(from).next().map(|(n, _)| n))
            || under(self.noncurrent.range::<str, _>(from).next().map(|(n, _)| n))
    }

    /// Makes `object` the live version of `name`; the one it replaces becomes
    /// noncurrent at `now_ms` under versioning, and is gone otherwise.
    pub(crate) fn put(&mut self, name: String, object: StoredObject, now_ms: u64) {
        let versioning = self.versioning();
        if let Some(replaced) = self.objects.insert(name.clone(), object)
            && versioning
        {
            self.keep_noncurrent(name, replaced, now_ms);
        }
    }

    /// Deletes the live version of `name` (as a delete that names no generation
    /// does): under versioning it becomes noncurrent at `now_ms`.
    pub(crate) fn delete_live(&mut self, name: &str, now_ms: u64) {
        if let Some(deleted) = self.objects.remove(name)
            && self.versioning()
        {
            self.keep_noncurrent(name.to_string(), deleted, now_ms);
        }
    }

    fn keep_noncurrent(&mut self, name: String, object: StoredObject, now_ms: u64) {
        let versions = self.noncurrent.entry(name).or_default();
        // Generations only grow: the one leaving is the largest so far.
        versions.push(Noncurrent {
            object,
            deleted_unix_ms: now_ms,
        });
    }

    /// Deletes version `generation` of `name` for good, live or noncurrent;
    /// whether there was one.
    pub(crate) fn delete_version(&mut self, name: &str, generation: i64) -> bool {
        if self
            .objects
            .get(name)
            .is_some_and(|o| o.generation == generation)
        {
            self.objects.remove(name);
            return true;
        }
        let Some(versions) = self.noncurrent.get_mut(name) else {
            return false;
        };
        let before = versions.len();
        versions.retain(|v| v.object.generation != generation);
        let deleted = versions.len() < before;
        if versions.is_empty() {
            self.noncurrent.remove(name);
        }
        deleted
    }

    /// The version of `name` a request asks for: `generation`, live or
    /// noncurrent, or the live one when it names none.
    pub(crate) fn version(&self, name: &str, generation: Option<i64>) -> Option<Version<'_>> {
        let live = self.objects.get(name);
        let Some(generation) = generation else {
            return live.map(|object| Version {
                object,
                deleted_unix_ms: None,
            });
        };
        if let Some(object) = live.filter(|o| o.generation == generation) {
            return Some(Version {
                object,
                deleted_unix_ms: None,
            });
        }
        let versions = self.noncurrent.get(name)?;
        let old = versions
            .iter()
            .find(|v| v.object.generation == generation)?;
        Some(Version {
            object: &old.object,
            deleted_unix_ms: Some(old.deleted_unix_ms),
        })
    }

    /// The version [`version`](Self::version) finds, to change its metadata.
    pub(crate) fn version_mut(
        &mut self,
        name: &str,
        generation: Option<i64>,
    ) -> Option<&mut StoredObject> {
        let live = self.objects.get_mut(name);
        let Some(generation) = generation else {
            return live;
        };
        if let Some(object) = live.filter(|o| o.generation == generation) {
            return Some(object);
        }
        let versions = self.noncurrent.get_mut(name)?;
        let old = versions
            .iter_mut()
            .find(|v| v.object.generation == generation)?;
        Some(&mut old.object)
    }

    /// Every version from `start` on, in name order and, within a name,
    /// generation ascending (noncurrent ones, then the live one); only the live
    /// ones unless `versions`.
    fn versions_from<'a>(
        &'a self,
        start: Bound<&'a str>,
        versions: bool,
    ) -> impl Iterator<Item = (&'a String, Version<'a>)> + 'a {
        let mut live = self
            .objects
            .range::<str, _>((start, Bound::Unbounded))
            .peekable();
        let mut old = (self.noncurrent.range::<str, _>((start, Bound::Unbounded)))
            .filter(move |_| versions)
            .peekable();
        let names = std::iter::from_fn(move || {
            let name: &'a String = match (live.peek(), old.peek()) {
                (None, None) => return None,
                (Some((l, _)), Some((o, _))) => (*l).min(*o),
                (Some((l, _)), None) => l,
                (None, Some((o, _))) => o,
            };
            let older = old.next_if(|(n, _)| *n == name).map(|(_, v)| v);
            let current = live.next_if(|(n, _)| *n == name).map(|(_, o)| o);
            Some((name, older, current))
        });
        names.flat_map(|(name, older, current)| {
            let older = older.into_iter().flatten().map(move |v| Version {
                object: &v.object,
                deleted_unix_ms: Some(v.deleted_unix_ms),
            });
            let current = current.map(|object| Version {
                object,
                deleted_unix_ms: None,
            });
            older.chain(current).map(move |v| (name, v))
        })
    }

    /// The bucket's retention period, when it has a retention policy.
    pub(crate) fn retention_period_ms(&self) -> Option<u64> {
        let period = self
            .meta
            .fields
            .get("retentionPolicy")?
            .get("retentionPeriod")?;
        let seconds = match period {
            Value::String(s) => s.parse::<u64>().ok()?,
            other => other.as_u64()?,
        };
        Some(seconds.saturating_mul(1000))
    }

    /// The fields Cloud Storage gives an object as it is written to this bucket at
    /// `created_unix_ms` with the resource fields `given` (see
    /// [`crate::wire::KEPT_FIELDS`]): those, `kmsKeyName` from the bucket's
    /// `encryption.defaultKmsKeyName` when none is given, `eventBasedHold: true`
    /// under `defaultEventBasedHold`, and `retentionExpirationTime` (creation plus
    /// the retention period) under a retention policy.
    pub(crate) fn new_object_fields(
        &self,
        created_unix_ms: u64,
        given: Map<String, Value>,
    ) -> Map<String, Value> {
        let mut fields = given;
        let default_key = (self.meta.fields.get("encryption"))
            .and_then(|e| e.get("defaultKmsKeyName"))
            .filter(|k| k.is_string());
        if let Some(key) = fields.get("kmsKeyName").or(default_key) {
            let key = key_version(key.as_str().unwrap_or_default());
            fields.insert("kmsKeyName".into(), Value::String(key));
        }
        let default_hold = self.meta.fields.get("defaultEventBasedHold");
        if default_hold.and_then(Value::as_bool) == Some(true) {
            fields.insert("eventBasedHold".into(), Value::Bool(true));
        }
        if let Some(period) = self.retention_period_ms() {
            let expires = rfc3339_millis(created_unix_ms.saturating_add(period));
            fields.insert("retentionExpirationTime".into(), Value::String(expires));
        }
        fields
    }

    /// 403, with Cloud Storage's message, when the live object `name` of this
    /// bucket (named `bucket`) may not be deleted or replaced at `now_ms`: it is
    /// under a temporary or event-based hold, or younger than the bucket's
    /// retention period.
    pub(crate) fn protect(&self, bucket: &str, name: &str, now_ms: u64) -> Result<(), Rejection> {
        match self.objects.get(name) {
            Some(object) => self.protect_version(bucket, name, object, now_ms),
            None => Ok(()),
        }
    }

    /// 403 when `object`, a version of `name`, may not be deleted at `now_ms`
    /// (see [`protect`](Self::protect)).
    pub(crate) fn protect_version(
        &self,
        bucket: &str,
        name: &str,
        object: &StoredObject,
        now_ms: u64,
    ) -> Result<(), Rejection> {
        for (key, hold) in [
            ("temporaryHold", "Temporary"),
            ("eventBasedHold", "Event-Based"),
        ] {
            if object.flag(key) {
                return Err(Rejection::status(
                    403,
                    format!(
                        "Object '{bucket}/{name}' is under active {hold} hold and cannot be \
                         deleted, overwritten or archived until hold is removed."
                    ),
                ));
            }
        }
        // The bucket's retention period runs from the object's creation, or from
        // the release of its event-based hold; its own retention, to its
        // retainUntilTime.
        let by_policy = (self.retention_period_ms())
            .map(|period| object.created_unix_ms.saturating_add(period))
            .map(|expires| expires.max(object.retention_expires_ms().unwrap_or(0)));
        let by_object = object.retention().map(|r| r.until_ms);
        if let Some(expires) = by_policy.max(by_object)
            && now_ms < expires
        {
            return Err(Rejection::status(
                403,
                format!(
                    "Object '{bucket}/{name}' is subject to bucket's retention policy or \
                     object retention and cannot be deleted or overwritten until {}",
                    rfc3339_millis(expires)
                ),
            ));
        }
        Ok(())
    }

    /// Lists the versions `query` asks for (live ones, or every one with
    /// `versions`; its prefix, end offset and glob), after `start_after`
    /// (exclusive), at most `query.max` entries (objects plus common prefixes when
    /// it has a delimiter).
    pub(crate) fn list(&self, query: &ListQuery, start_after: Option<After<'_>>) -> ListPage {
        let prefix = query.prefix.as_str();
        let (start, skip) = match start_after {
            Some((after, generation)) if after >= prefix => {
                (Bound::Included(after), Some((after, generation)))
            }
            _ => (Bound::Included(prefix), None),
        };
        let mut page = ListPage::default();
        let mut count = 0;
        let mut last: Option<(String, i64)> = None;
        let delimiter = query.delimiter.as_deref().filter(|d| !d.is_empty());
        for (name, version) in self.versions_from(start, query.versions) {
            let generation = version.object.generation;
            if skip.is_some_and(|(after, g)| name == after && generation <= g) {
                continue;
            }
            if !name.starts_with(prefix) || query.before.as_ref().is_some_and(|end| name >= end) {
                break;
            }
            if query.glob.as_ref().is_some_and(|glob| !glob.matches(name)) {
                continue;
            }
            let common = delimiter.and_then(|d| common_prefix(name, prefix, d));
            // A folder object (`a/` beside the prefix `a/`), when asked for, is
            // listed in each of its versions; the rest folds into the prefix.
            let folder = query.include_trailing_delimiter && common == Some(name.as_str());
            let folded = common.is_some_and(|c| page.prefixes.last().is_some_and(|p| p == c));
            if folded && !folder {
                continue;
            }
            if count == query.max {
                if let Some((name, g)) = last {
                    page.resume_after = Some(name);
                    page.resume_generation = query.versions.then_some(g);
                }
                break;
            }
            count += 1;
            let listed = (version.object.record(name), version.meta());
            match common {
                Some(common) => {
                    if folder {
                        page.objects.push(listed);
                    }
                    if !folded {
                        page.prefixes.push(common.to_string());
                    }
                    // Past the whole prefix, unless later versions of its folder
                    // object may follow.
                    last = Some(match folder && query.versions {
                        true => (name.clone(), generation),
                        false => (format!("{common}{AFTER_PREFIX}"), i64::MAX),
                    });
                }
                None => {
                    page.objects.push(listed);
                    last = Some((name.clone(), generation));
                }
            }
        }
        page
    }
}

/// The key version an object written with the Cloud KMS key `key` answers in
/// its `kmsKeyName`. The service encrypts with the key's primary version and
/// names it: `projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N`.
/// The fake has no KMS, so it names version 1 (a key's first version, the
/// primary of a key never rotated; clients compare with `startswith` the key
/// they gave); a name that already names a version is kept as given.
fn key_version(key: &str) -> String {
    match key.contains("/cryptoKeyVersions/") {
        true => key.to_string(),
        false => format!("{key}/cryptoKeyVersions/1"),
    }
}

/// The common prefix `name` folds into: `prefix` and the rest of `name` up to and
/// including its first `delimiter` after `prefix`, if it has one.
fn common_prefix<'a>(name: &'a str, prefix: &str, delimiter: &str) -> Option<&'a str> {
    let at = name[prefix.len()..].find(delimiter)?;
    Some(&name[..prefix.len() + at + delimiter.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(names: &[&str]) -> Bucket {
        let mut b = Bucket::new(0);
        for (i, name) in names.iter().enumerate() {
            let record = ObjectRecord {
                name: name.to_string(),
                generation: i as i64 + 1,
                size: 0,
                crc32c: 0,
                md5: [0; 16],
                created_unix_ms: 0,
                content_type: Cow::Borrowed(""),
                attributes: None,
                component_count: None,
            };
            let (name, object) = StoredObject::new(record, None);
            b.objects.insert(name, object);
        }
        b
    }

    fn list(
        b: &Bucket,
        prefix: &str,
        delimiter: Option<&str>,
        after: Option<&str>,
        max: usize,
    ) -> ListPage {
        let query = ListQuery {
            prefix: prefix.into(),
            delimiter: delimiter.map(str::to_string),
            max,
            ..ListQuery::default()
        };
        b.list(&query, after.map(|a| (a, i64::MAX)))
    }

    fn parsed(query: &str) -> ListQuery {
        let query = crate::wire::Query::parse(Some(query));
        ListQuery::parse(crate::wire::Api::Json, &query, 1000).unwrap()
    }

    #[test]
    fn an_end_offset_stops_before_its_name() {
        let b = bucket(&["a", "b", "b0", "c"]);
        assert_eq!(names(&b.list(&parsed("endOffset=b0"), None)), ["a", "b"]);
        assert_eq!(
            names(&b.list(&parsed("startOffset=b&endOffset=c"), Some(("a", i64::MAX)))),
            ["b", "b0"]
        );
        assert_eq!(
            names(&b.list(&parsed("endOffset="), None)),
            ["a", "b", "b0", "c"]
        );
    }

    #[test]
    fn a_match_glob_keeps_star_within_a_segment_and_double_star_across() {
        let b = bucket(&["a.txt", "d/a.txt", "d/e/a.txt", "d/a.csv", "d/b.txt", "x"]);
        let glob = |g: &str| names(&b.list(&parsed(&format!("matchGlob={g}")), None)).join(" ");
        assert_eq!(glob("*.txt"), "a.txt");
        assert_eq!(glob("d/*.txt"), "d/a.txt d/b.txt");
        assert_eq!(glob("**/a.txt"), "a.txt d/a.txt d/e/a.txt");
        assert_eq!(glob("d/**"), "d/a.csv d/a.txt d/b.txt d/e/a.txt");
        assert_eq!(glob("d/?.{csv,txt}"), "d/a.csv d/a.txt d/b.txt");
        assert_eq!(glob("d/[!a].txt"), "d/b.txt");
        // With a delimiter, prefixes come from the names the glob keeps.
        let folded = b.list(&parsed("matchGlob=**/a.txt&delimiter=/"), None);
        assert_eq!(
            (names(&folded), folded.prefixes.clone()),
            (vec!["a.txt"], vec!["d/".to_string()])
        );
        let q = crate::wire::Query::parse(Some("matchGlob=d/[a"));
        let refused = ListQuery::parse(crate::wire::Api::Json, &q, 10).unwrap_err();
        assert!(
            format!("{refused:?}").contains("Invalid matchGlob \\\"d/[a\\\""),
            "{refused:?}"
        );
    }

    #[test]
    fn a_trailing_delimiter_object_is_listed_beside_its_prefix_when_asked() {
        let b = bucket(&["a/", "a/b", "a/c/", "a/c/d", "e"]);
        let without = b.list(&parsed("delimiter=/"), None);
        assert_eq!(
            (names(&without), without.prefixes.clone()),
            (vec!["e"], vec!["a/".to_string()])
        );
        let with = b.list(&parsed("delimiter=/&includeTrailingDelimiter=true"), None);
        assert_eq!(
            (names(&with), with.prefixes.clone()),
            (vec!["a/", "e"], vec!["a/".to_string()])
        );
        // Under the prefix `a/`, the object `a/` is an object like any other.
        let inner = b.list(
            &parsed("prefix=a/&delimiter=/&includeTrailingDelimiter=true"),
            None,
        );
        assert_eq!(
            (names(&inner), inner.prefixes.clone()),
            (vec!["a/", "a/b", "a/c/"], vec!["a/c/".to_string()])
        );
        let q = crate::wire::Query::parse(Some("includeTrailingDelimiter=yes"));
        assert!(ListQuery::parse(crate::wire::Api::Json, &q, 10).is_err());
    }

    #[test]
    fn every_version_of_a_folder_object_is_listed_beside_its_prefix() {
        let mut b = bucket(&["a/", "a/b"]);
        b.meta
            .fields
            .insert("versioning".into(), serde_json::json!({ "enabled": true }));
        let (name, replacement) = StoredObject::new(b.objects["a/"].record("a/"), None);
        let mut replacement = replacement;
        replacement.generation = 9;
        b.put(name, replacement, 0);
        let query = "versions=true&delimiter=/&includeTrailingDelimiter=true";
        let all = b.list(&parsed(query), None);
        let generations: Vec<i64> = all.objects.iter().map(|(o, _)| o.generation).collect();
        assert_eq!(
            (generations, all.prefixes),
            (vec![1, 9], vec!["a/".to_string()])
        );
        // A page that ends after the first version resumes with the second.
        let first = b.list(&parsed(&format!("{query}&maxResults=1")), None);
        assert_eq!(
            (first.resume_after.as_deref(), first.resume_generation),
            (Some("a/"), Some(1))
        );
        let next = b.list(&parsed(query), Some(("a/", 1)));
        assert_eq!(
            next.objects
                .iter()
                .map(|(o, _)| o.generation)
                .collect::<Vec<_>>(),
            [9]
        );
    }

    fn names(page: &ListPage) -> Vec<&str> {
        page.objects.iter().map(|(o, _)| o.name.as_str()).collect()
    }

    #[test]
    fn listing_pages_through_a_prefix_in_name_order() {
        let b = bucket(&["a/1", "a/2", "a/3", "b/1", "a0"]);
        let first = list(&b, "a/", None, None, 2);
        assert_eq!(names(&first), ["a/1", "a/2"]);
        let next = list(&b, "a/", None, first.resume_after.as_deref(), 2);
        assert_eq!(names(&next), ["a/3"]);
        assert_eq!(next.resume_after, None);
    }

    #[test]
    fn a_delimiter_folds_names_into_common_prefixes_across_pages() {
        let b = bucket(&["a/x/1", "a/x/2", "a/y", "a/z/1", "b"]);
        let first = list(&b, "a/", Some("/"), None, 2);
        assert_eq!(first.prefixes, ["a/x/"]);
        assert_eq!(names(&first), ["a/y"]);
        let next = list(&b, "a/", Some("/"), first.resume_after.as_deref(), 2);
        assert_eq!(next.prefixes, ["a/z/"]);
        assert!(next.objects.is_empty());
        let all = list(&b, "", Some("/"), None, 10);
        assert_eq!(all.prefixes, ["a/"]);
        assert_eq!(names(&all), ["b"]);
        // Resuming after a common prefix skips everything under it.
        let past = format!("a/{AFTER_PREFIX}");
        let after = list(&b, "", Some("/"), Some(&past), 10);
        assert!(after.prefixes.is_empty());
        assert_eq!(names(&after), ["b"]);
    }

    #[test]
    fn an_object_without_attributes_costs_no_more_than_before_them() {
        // 104 bytes before attributes were kept (the content type was inline).
        assert!(std::mem::size_of::<StoredObject>() <= 88);
        // A noncurrent version: the same, and when it stopped being live.
        assert!(std::mem::size_of::<Noncurrent>() <= 96);
        let plain = ObjectRecord {
            name: "a".into(),
            generation: 1,
            size: 0,
            crc32c: 0,
            md5: [0; 16],
            created_unix_ms: 0,
            content_type: Cow::Borrowed(DEFAULT_CONTENT_TYPE),
            attributes: None,
            component_count: None,
        };
        let (name, stored) = StoredObject::new(plain.clone(), None);
        assert!(stored.described.is_none());
        assert_eq!(stored.record(&name), plain);
        // Another content type, attributes and a component count survive the split.
        let described = ObjectRecord {
            content_type: Cow::Owned("text/plain".into()),
            attributes: ObjectAttributes {
                content_language: Some("en".into()),
                ..Default::default()
            }
            .boxed(),
            component_count: NonZeroU32::new(2),
            ..plain
        };
        let (name, stored) = StoredObject::new(described.clone(), None);
        assert_eq!(stored.record(&name), described);
    }

    #[test]
    fn an_edit_changes_the_metageneration_and_keeps_the_bytes_description() {
        let record = ObjectRecord {
            name: "a".into(),
            generation: 5,
            size: 3,
            crc32c: 9,
            md5: [1; 16],
            created_unix_ms: 100,
            content_type: Cow::Borrowed(DEFAULT_CONTENT_TYPE),
            attributes: None,
            component_count: None,
        };
        let (name, mut stored) = StoredObject::new(record.clone(), None);
        assert_eq!((stored.live(), stored.meta()), ((5, 1), None));
        let mut edit = stored.edit();
        edit.content_type = Cow::Owned("text/plain".into());
        edit.changed(200);
        stored.set_edit(edit);
        assert_eq!(stored.live(), (5, 2));
        assert_eq!(stored.meta().unwrap().updated_unix_ms, 200);
        let after = stored.record(&name);
        assert_eq!(after.content_type, "text/plain");
        assert_eq!((after.size, after.crc32c, after.md5), (3, 9, [1; 16]));
    }
}
