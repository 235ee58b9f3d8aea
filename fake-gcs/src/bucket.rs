//! What a bucket holds and the rules for changing it: one live generation per name,
//! generations that only grow, preconditions checked atomically with the write, and
//! listing in name order with resumable pages.
//!
//! Per object the fake keeps about 100 bytes plus the name (its digests, size,
//! generation, creation time, content type) and, only when `keep_bytes` is set, the
//! bytes themselves.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::wire::{ListPage, ObjectRecord};

/// A stored object: its record without the name (the bucket's map key already holds
/// it, and a long replay keeps millions), and the bytes when the fake keeps them.
#[derive(Debug, Clone)]
pub(crate) struct StoredObject {
    pub(crate) generation: i64,
    size: u64,
    crc32c: u32,
    md5: [u8; 16],
    created_unix_ms: u64,
    content_type: Cow<'static, str>,
    pub(crate) bytes: Option<Bytes>,
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
        } = record;
        let stored = Self {
            generation,
            size,
            crc32c,
            md5,
            created_unix_ms,
            content_type,
            bytes,
        };
        (name, stored)
    }

    /// The record of this object, stored under `name`.
    pub(crate) fn record(&self, name: &str) -> ObjectRecord {
        self.clone().into_record(name.to_string())
    }

    /// The record of this object, stored under `name`, without copying.
    pub(crate) fn into_record(self, name: String) -> ObjectRecord {
        ObjectRecord {
            name,
            generation: self.generation,
            size: self.size,
            crc32c: self.crc32c,
            md5: self.md5,
            created_unix_ms: self.created_unix_ms,
            content_type: self.content_type,
        }
    }
}

/// One bucket.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub(crate) created_unix_ms: u64,
    pub(crate) objects: BTreeMap<String, StoredObject>,
}

/// Sorts after every name that starts with a given prefix (U+10FFFF is the largest
/// scalar value), so a page can resume after a whole common prefix.
const AFTER_PREFIX: char = '\u{10FFFF}';

impl Bucket {
    pub(crate) fn new(created_unix_ms: u64) -> Self {
        Self {
            created_unix_ms,
            objects: BTreeMap::new(),
        }
    }

    /// The largest name below `name`: where a listing that starts at `name`
    /// (inclusive) resumes after.
    pub(crate) fn last_before(&self, name: &str) -> Option<String> {
        self.objects
            .range::<str, _>((Bound::Unbounded, Bound::Excluded(name)))
            .next_back()
            .map(|(k, _)| k.clone())
    }

    /// Lists names starting with `prefix`, after `start_after` (exclusive), at most
    /// `max` entries (objects plus common prefixes when `delimiter` is set).
    pub(crate) fn list(
        &self,
        prefix: &str,
        delimiter: Option<&str>,
        start_after: Option<&str>,
        max: usize,
    ) -> ListPage {
        let start = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        let mut page = ListPage::default();
        let mut count = 0;
        let mut last: Option<String> = None;
        let delimiter = delimiter.filter(|d| !d.is_empty());
        for (name, object) in self.objects.range::<str, _>((start, Bound::Unbounded)) {
            if !name.starts_with(prefix) {
                break;
            }
            let common = delimiter.and_then(|d| {
                name[prefix.len()..]
                    .find(d)
                    .map(|i| &name[..prefix.len() + i + d.len()])
            });
            if let Some(common) = common
                && page.prefixes.last().is_some_and(|p| p == common)
            {
                continue;
            }
            if count == max {
                page.resume_after = last;
                break;
            }
            count += 1;
            match common {
                Some(common) => {
                    page.prefixes.push(common.to_string());
                    last = Some(format!("{common}{AFTER_PREFIX}"));
                }
                None => {
                    page.objects.push(object.record(name));
                    last = Some(name.clone());
                }
            }
        }
        page
    }
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
            };
            let (name, object) = StoredObject::new(record, None);
            b.objects.insert(name, object);
        }
        b
    }

    fn names(page: &ListPage) -> Vec<&str> {
        page.objects.iter().map(|o| o.name.as_str()).collect()
    }

    #[test]
    fn listing_pages_through_a_prefix_in_name_order() {
        let b = bucket(&["a/1", "a/2", "a/3", "b/1", "a0"]);
        let first = b.list("a/", None, None, 2);
        assert_eq!(names(&first), ["a/1", "a/2"]);
        let next = b.list("a/", None, first.resume_after.as_deref(), 2);
        assert_eq!(names(&next), ["a/3"]);
        assert_eq!(next.resume_after, None);
    }

    #[test]
    fn a_delimiter_folds_names_into_common_prefixes_across_pages() {
        let b = bucket(&["a/x/1", "a/x/2", "a/y", "a/z/1", "b"]);
        let first = b.list("a/", Some("/"), None, 2);
        assert_eq!(first.prefixes, ["a/x/"]);
        assert_eq!(names(&first), ["a/y"]);
        let next = b.list("a/", Some("/"), first.resume_after.as_deref(), 2);
        assert_eq!(next.prefixes, ["a/z/"]);
        assert!(next.objects.is_empty());
        let all = b.list("", Some("/"), None, 10);
        assert_eq!(all.prefixes, ["a/"]);
        assert_eq!(names(&all), ["b"]);
        // Resuming after a common prefix skips everything under it.
        let after = b.list("", Some("/"), Some(&format!("a/{AFTER_PREFIX}")), 10);
        assert!(after.prefixes.is_empty());
        assert_eq!(names(&after), ["b"]);
    }
}
