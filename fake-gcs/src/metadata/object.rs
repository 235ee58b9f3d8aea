//! An object's metadata as a patch or update changes it: content type, the
//! attributes the fake keeps for every object ([`ObjectAttributes`]), and what only
//! metadata calls set ([`ObjectChanges`]: metageneration, storage class, ACL, other
//! fields).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::acl::Acl;
use crate::wire::{DEFAULT_CONTENT_TYPE, ObjectAttributes, ObjectMeta, Rejection, content_type};

/// Fields of the object resource that describe the stored bytes or that the
/// server keeps: a patch or update leaves them alone.
const READ_ONLY: &[&str] = &[
    "kind",
    "id",
    "selfLink",
    "mediaLink",
    "name",
    "bucket",
    "generation",
    "metageneration",
    "size",
    "md5Hash",
    "crc32c",
    "etag",
    "timeCreated",
    "updated",
    "timeStorageClassUpdated",
    "timeDeleted",
    "componentCount",
    "owner",
    "storageClass",
    "kmsKeyName",
    "customerEncryption",
    "retentionExpirationTime",
];

/// What metadata calls changed on an object (kept only once one has).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ObjectChanges {
    pub(crate) meta: ObjectMeta,
    /// The object's ACL, once set; until then its bucket's default object ACL.
    pub(crate) acl: Option<Acl>,
}

/// An object's editable metadata, taken out of the store, changed, put back.
#[derive(Debug, Clone)]
pub(crate) struct ObjectEdit {
    pub(crate) content_type: Cow<'static, str>,
    pub(crate) attributes: ObjectAttributes,
    pub(crate) changes: ObjectChanges,
}

impl ObjectEdit {
    /// Applies an object resource `body`: a patch (`replace: false`) changes the
    /// fields given (`null` clears one, `metadata` merges key by key); an update
    /// (`replace: true`) makes them all there is. 400 for an ACL that is not one.
    pub(crate) fn apply(
        &mut self,
        body: &Map<String, Value>,
        replace: bool,
    ) -> Result<(), Rejection> {
        if replace {
            self.content_type = Cow::Borrowed(DEFAULT_CONTENT_TYPE);
            self.attributes = ObjectAttributes::default();
            // What the service computed or the upload fixed (its KMS key) stays:
            // only what a client may set goes.
            (self.changes.meta.extra).retain(|k, _| READ_ONLY.contains(&k.as_str()));
        }
        for (key, value) in body {
            let text = value.as_str();
            let a = &mut self.attributes;
            match key.as_str() {
                k if READ_ONLY.contains(&k) => {}
                "acl" => self.changes.acl = Some(Acl::from_json(value)?),
                "contentType" => self.content_type = content_type(text),
                "contentEncoding" => a.content_encoding = text.map(str::to_string),
                "contentDisposition" => a.content_disposition = text.map(str::to_string),
                "contentLanguage" => a.content_language = text.map(str::to_string),
                "cacheControl" => a.cache_control = text.map(str::to_string),
                "customTime" => a.custom_time = text.map(str::to_string),
                "metadata" => merge_metadata(a, value, replace),
                _ if value.is_null() => {
                    self.changes.meta.extra.remove(key);
                }
                _ => {
                    self.changes.meta.extra.insert(key.clone(), value.clone());
                }
            }
        }
        Ok(())
    }

    /// Counts a change made at `now_ms`.
    pub(crate) fn changed(&mut self, now_ms: u64) {
        let meta = &mut self.changes.meta;
        meta.metageneration = meta.metageneration.max(1) + 1;
        meta.updated_unix_ms = now_ms;
    }
}

fn merge_metadata(attributes: &mut ObjectAttributes, value: &Value, replace: bool) {
    let Value::Object(changes) = value else {
        attributes.metadata.clear();
        return;
    };
    if replace {
        attributes.metadata.clear();
    }
    for (key, value) in changes {
        match value.as_str() {
            Some(text) => attributes.metadata.insert(key.clone(), text.to_string()),
            None => attributes.metadata.remove(key),
        };
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn edit() -> ObjectEdit {
        ObjectEdit {
            content_type: Cow::Borrowed("text/plain"),
            attributes: ObjectAttributes {
                cache_control: Some("no-store".into()),
                metadata: [("a".to_string(), "1".to_string())].into(),
                ..Default::default()
            },
            changes: ObjectChanges::default(),
        }
    }

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_patch_changes_what_it_names_and_an_update_replaces_everything() {
        let mut patched = edit();
        let body =
            map(json!({ "metadata": { "a": null, "b": "2" }, "temporaryHold": true, "size": "9" }));
        patched.apply(&body, false).unwrap();
        patched.changed(60_000);
        assert_eq!(patched.content_type, "text/plain");
        assert_eq!(
            patched.attributes.cache_control.as_deref(),
            Some("no-store")
        );
        assert_eq!(
            patched.attributes.metadata,
            [("b".to_string(), "2".to_string())].into()
        );
        assert_eq!(patched.changes.meta.extra["temporaryHold"], true);
        assert!(!patched.changes.meta.extra.contains_key("size"));
        assert_eq!(patched.changes.meta.metageneration, 2);

        let mut updated = patched.clone();
        updated
            .apply(&map(json!({ "contentLanguage": "en" })), true)
            .unwrap();
        updated.changed(61_000);
        assert_eq!(updated.content_type, DEFAULT_CONTENT_TYPE);
        assert_eq!(updated.attributes.cache_control, None);
        assert!(updated.attributes.metadata.is_empty());
        assert!(updated.changes.meta.extra.is_empty());
        assert_eq!(updated.changes.meta.metageneration, 3);
    }
}
