//! What the fake keeps for the JSON API's metadata calls, beside objects and their
//! bytes: a bucket's settable fields, metageneration, access control lists, IAM
//! policy and notification configurations ([`BucketMeta`]); what patches changed
//! on an object ([`ObjectEdit`]); the projects' HMAC keys ([`HmacKeys`]). Plain
//! data and the rules for changing it; [`crate::api`] serves the requests.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`BucketMeta`]: fields, metageneration, IAM policy, notifications |
//! | `acl.rs` | [`Acl`]: access control lists, predefined lists, their JSON |
//! | `object.rs` | [`ObjectEdit`]: an object's patch and update |
//! | `hmac.rs` | [`HmacKeys`]: HMAC keys per project, the service account |
//! | `retention.rs` | object retention: its rules, the bucket's `objectRetention` |
//! | `computed.rs` | the times autoclass, soft delete and encryption enforcement take effect |
//! | `managed_folder.rs` | [`ManagedFolders`]: a bucket's managed folders and their IAM policies |

mod acl;
mod computed;
mod hmac;
pub(crate) mod managed_folder;
mod object;
pub(crate) mod retention;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

pub(crate) use acl::{Acl, Owner, entry_fields};
pub(crate) use hmac::{HmacKeys, KeyFilter, service_account};
pub(crate) use managed_folder::ManagedFolders;
pub(crate) use object::{ObjectChanges, ObjectEdit};

use crate::wire::{BUCKET_READ_ONLY_FIELDS, Rejection, bucket_etag, location_type, rfc3339_millis};

/// A bucket's metadata.
#[derive(Debug, Clone)]
pub(crate) struct BucketMeta {
    /// The project it was created in (`project=` of the insert).
    pub(crate) project: String,
    pub(crate) metageneration: i64,
    pub(crate) updated_unix_ms: u64,
    /// The fields a client set (labels, storage class, retention policy, ...).
    pub(crate) fields: Map<String, Value>,
    pub(crate) acl: Acl,
    pub(crate) default_object_acl: Acl,
    pub(crate) iam: IamPolicy,
    /// Notification configurations by id.
    pub(crate) notifications: BTreeMap<u64, Value>,
    next_notification: u64,
}

/// The project a bucket that no insert named belongs to.
pub(crate) const DEFAULT_PROJECT: &str = "fake-project";

/// How a body changes a bucket's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// `PATCH`: the fields given change (`null` removes one; labels merge).
    Patch,
    /// `PUT` or an insert: the fields given are all there is.
    Replace,
}

impl BucketMeta {
    /// Whether `iamConfiguration.uniformBucketLevelAccess.enabled` is on: then the
    /// bucket's IAM policy alone grants access, and its legacy ACLs cannot be used.
    pub(crate) fn uniform_access(&self) -> bool {
        let config = self.fields.get("iamConfiguration");
        let uniform = config.and_then(|c| c.get("uniformBucketLevelAccess"));
        uniform
            .and_then(|u| u.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// A bucket created at `now_ms` in `project`, with nothing set.
    pub(crate) fn new(project: &str, now_ms: u64) -> Self {
        Self {
            project: project.to_string(),
            metageneration: 1,
            updated_unix_ms: now_ms,
            fields: Map::new(),
            acl: Acl::project_private(),
            default_object_acl: Acl::project_private(),
            iam: IamPolicy::default(),
            notifications: BTreeMap::new(),
            next_notification: 1,
        }
    }

    /// Places a new bucket as Cloud Storage does: its location upper-cased (`US`
    /// when none was given) and the `locationType` that location has, whatever
    /// the insert said of it.
    pub(crate) fn place(&mut self) {
        let location = match self.fields.get("location").and_then(Value::as_str) {
            Some(location) => location.to_ascii_uppercase(),
            None => "US".to_string(),
        };
        let custom = self.fields.contains_key("customPlacementConfig");
        let kind = location_type(&location, custom);
        self.fields.insert("location".into(), json!(location));
        self.fields.insert("locationType".into(), json!(kind));
    }

    /// Counts a change made at `now_ms`.
    pub(crate) fn changed(&mut self, now_ms: u64) {
        self.metageneration += 1;
        self.updated_unix_ms = now_ms;
    }

    /// Applies a bucket resource `body` as `change` says, at `now_ms`; changes
    /// nothing and answers 400 (a malformed ACL) or 403 (a locked retention
    /// policy) when it cannot.
    pub(crate) fn apply(
        &mut self,
        body: &Map<String, Value>,
        change: Change,
        now_ms: u64,
    ) -> Result<(), Rejection> {
        let locked = self.retention_locked();
        let mut next = self.clone();
        if change == Change::Replace {
            let keep = [
                "location",
                "locationType",
                "retentionPolicy",
                "objectRetention",
            ];
            next.fields.retain(|k, _| keep.contains(&k.as_str()));
        }
        for (key, value) in body {
            match key.as_str() {
                "acl" => next.acl = Acl::from_json(value)?,
                "defaultObjectAcl" => next.default_object_acl = Acl::from_json(value)?,
                k if BUCKET_READ_ONLY_FIELDS.contains(&k) => {}
                "location" | "locationType" if change == Change::Patch => {}
                "labels" if change == Change::Patch => merge_labels(&mut next.fields, value),
                "iamConfiguration" if !value.is_null() => {
                    check_public_access_prevention(value)?;
                    next.fields.insert(key.clone(), value.clone());
                }
                "retentionPolicy" => {
                    if locked {
                        return Err(Rejection::status(
                            403,
                            "The bucket's retention policy is locked and cannot be changed.",
                        ));
                    }
                    next.set_retention(value, now_ms);
                }
                _ if value.is_null() => {
                    next.fields.remove(key);
                }
                _ => {
                    next.fields.insert(key.clone(), value.clone());
                }
            }
        }
        if change == Change::Replace && !body.contains_key("retentionPolicy") && !locked {
            next.fields.remove("retentionPolicy");
        }
        computed::stamp(&self.fields, &mut next.fields, now_ms);
        *self = next;
        Ok(())
    }

    fn set_retention(&mut self, value: &Value, now_ms: u64) {
        let Some(period) = value.get("retentionPeriod").filter(|p| !p.is_null()) else {
            self.fields.remove("retentionPolicy");
            return;
        };
        let period = match period {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let policy = json!({
            "retentionPeriod": period,
            "effectiveTime": rfc3339_millis(now_ms),
            "isLocked": false,
        });
        self.fields.insert("retentionPolicy".into(), policy);
    }

    fn retention_locked(&self) -> bool {
        self.fields
            .get("retentionPolicy")
            .and_then(|p| p.get("isLocked"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Locks the retention policy (`lockRetentionPolicy`); 400 when there is none.
    pub(crate) fn lock_retention(&mut self) -> Result<(), Rejection> {
        match self.fields.get_mut("retentionPolicy") {
            Some(Value::Object(policy)) => {
                policy.insert("isLocked".into(), Value::Bool(true));
                Ok(())
            }
            _ => Err(Rejection::invalid(
                "The bucket has no retention policy to lock.",
            )),
        }
    }

    /// Adds a notification configuration from its resource; 400 without a topic.
    pub(crate) fn add_notification(&mut self, body: &Map<String, Value>) -> Result<u64, Rejection> {
        let Some(topic) = body
            .get("topic")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        else {
            return Err(Rejection::invalid("Required: topic."));
        };
        let id = self.next_notification;
        self.next_notification += 1;
        let mut config = body.clone();
        config.insert("topic".into(), json!(topic));
        config
            .entry("payload_format")
            .or_insert_with(|| json!("JSON_API_V1"));
        self.notifications.insert(id, Value::Object(config));
        Ok(id)
    }

    /// A notification configuration as the JSON API shows it.
    pub(crate) fn notification_json(&self, base: &str, bucket: &str, id: u64) -> Option<Value> {
        let Value::Object(config) = self.notifications.get(&id)? else {
            return None;
        };
        let mut shown = config.clone();
        let link = format!(
            "{base}/storage/v1/b/{}/notificationConfigs/{id}",
            crate::wire::encode_component(bucket)
        );
        shown.insert("kind".into(), json!("storage#notification"));
        shown.insert("id".into(), json!(id.to_string()));
        shown.insert("selfLink".into(), json!(link));
        shown.insert("etag".into(), json!(id.to_string()));
        Some(Value::Object(shown))
    }
}

/// 400 unless `iamConfiguration.publicAccessPrevention`, when given, is one of
/// the two values Cloud Storage takes.
fn check_public_access_prevention(iam_configuration: &Value) -> Result<(), Rejection> {
    match iam_configuration.get("publicAccessPrevention") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(v)) if v == "inherited" || v == "enforced" => Ok(()),
        Some(other) => Err(Rejection::invalid(format!(
            "Invalid argument: iamConfiguration.publicAccessPrevention {other} is not \
             \"inherited\" or \"enforced\"."
        ))),
    }
}

fn merge_labels(fields: &mut Map<String, Value>, value: &Value) {
    let Value::Object(changes) = value else {
        fields.remove("labels");
        return;
    };
    let labels = fields
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(labels) = labels else {
        return;
    };
    for (key, value) in changes {
        match value.is_null() {
            true => labels.remove(key),
            false => labels.insert(key.clone(), value.clone()),
        };
    }
}

/// A bucket's IAM policy: the fake keeps and shows it, and grants every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IamPolicy {
    pub(crate) version: i64,
    /// The bindings, as set; `None` until a policy is set (the default bindings
    /// are shown).
    pub(crate) bindings: Option<Vec<Value>>,
    /// How many times the policy was set: its ETag.
    pub(crate) revision: i64,
}

impl Default for IamPolicy {
    fn default() -> Self {
        Self {
            version: 1,
            bindings: None,
            revision: 1,
        }
    }
}

impl IamPolicy {
    /// Its ETag: changes each time the policy is set.
    pub(crate) fn etag(&self) -> String {
        bucket_etag(self.revision)
    }

    /// The policy as the JSON API shows it for `bucket` of `project`.
    pub(crate) fn json(&self, bucket: &str, project: &str) -> Value {
        let bindings = self.bindings.clone().unwrap_or_else(|| {
            vec![
                json!({
                    "role": "roles/storage.legacyBucketOwner",
                    "members": [format!("projectEditor:{project}"), format!("projectOwner:{project}")],
                }),
                json!({
                    "role": "roles/storage.legacyBucketReader",
                    "members": [format!("projectViewer:{project}")],
                }),
            ]
        });
        json!({
            "kind": "storage#policy",
            "resourceId": format!("projects/_/buckets/{bucket}"),
            "version": self.version,
            "etag": self.etag(),
            "bindings": bindings,
        })
    }

    /// Sets the policy from a `setIamPolicy` body: 412 when it carries an `etag`
    /// that is not the current one, 400 when its bindings are not an array.
    pub(crate) fn set(&mut self, body: &Map<String, Value>) -> Result<(), Rejection> {
        if let Some(etag) = body.get("etag").and_then(Value::as_str)
            && etag != self.etag()
        {
            return Err(Rejection::PreconditionFailed);
        }
        let bindings = match body.get("bindings") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(bindings)) => bindings.clone(),
            Some(_) => {
                return Err(Rejection::invalid(
                    "Invalid argument: bindings must be an array.",
                ));
            }
        };
        self.bindings = Some(bindings);
        if let Some(version) = body.get("version").and_then(Value::as_i64) {
            self.version = version;
        }
        self.revision += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_patch_merges_labels_and_an_update_replaces_the_fields() {
        let mut meta = BucketMeta::new("p", 0);
        let insert = body(
            json!({ "labels": { "a": "1", "b": "2" }, "storageClass": "NEARLINE", "location": "EU" }),
        );
        meta.apply(&insert, Change::Replace, 0).unwrap();
        let patch =
            body(json!({ "labels": { "a": null, "c": "3" }, "location": "US", "name": "other" }));
        meta.apply(&patch, Change::Patch, 10).unwrap();
        assert_eq!(meta.fields["labels"], json!({ "b": "2", "c": "3" }));
        assert_eq!(meta.fields["location"], "EU");
        assert!(!meta.fields.contains_key("name"));
        meta.apply(
            &body(json!({ "storageClass": "STANDARD" })),
            Change::Replace,
            20,
        )
        .unwrap();
        assert_eq!(meta.fields.get("labels"), None);
        assert_eq!(meta.fields["location"], "EU");
    }

    #[test]
    fn a_locked_retention_policy_cannot_change() {
        let mut meta = BucketMeta::new("p", 0);
        assert!(meta.lock_retention().is_err());
        let retain = body(json!({ "retentionPolicy": { "retentionPeriod": 60 } }));
        meta.apply(&retain, Change::Patch, 5).unwrap();
        assert_eq!(meta.fields["retentionPolicy"]["retentionPeriod"], "60");
        meta.lock_retention().unwrap();
        let remove = body(json!({ "retentionPolicy": null }));
        let refused = meta.apply(&remove, Change::Patch, 6);
        assert!(matches!(
            refused,
            Err(Rejection::Status { status: 403, .. })
        ));
        assert_eq!(meta.fields["retentionPolicy"]["isLocked"], true);
    }

    #[test]
    fn setting_a_policy_needs_the_current_etag_when_one_is_given() {
        let mut iam = IamPolicy::default();
        let stale = body(json!({ "bindings": [], "etag": "CAk=" }));
        assert_eq!(iam.set(&stale), Err(Rejection::PreconditionFailed));
        let current =
            body(json!({ "bindings": [{ "role": "r", "members": ["m"] }], "etag": iam.etag() }));
        iam.set(&current).unwrap();
        assert_ne!(iam.etag(), bucket_etag(1));
        assert_eq!(iam.json("b", "p")["bindings"][0]["role"], "r");
    }
}
