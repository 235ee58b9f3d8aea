//! Buckets through the JSON API: insert, get, list, patch, update, delete, the
//! retention lock, the IAM policy and permissions, notification configurations.
//! Every change counts a metageneration, and `ifMetagenerationMatch` /
//! `ifMetagenerationNotMatch` hold against it.

use serde_json::{Value, json};

use super::{Ctx, Served};
use crate::bucket::Bucket;
use crate::metadata::{Acl, BucketMeta, Change, DEFAULT_PROJECT, retention};
use crate::wire::{self, Conditions, Rejection, Reply, Verb};

/// Cloud Storage's answer to creating a bucket that exists.
const BUCKET_EXISTS: &str =
    "Your previous request to create the named bucket succeeded and you already own it.";

impl Ctx<'_> {
    /// The bucket resource of `name` (which exists), with its ACLs for the full
    /// projection.
    pub(super) fn bucket_resource(&self, name: &str, full: bool) -> Value {
        let b = &self.state.buckets[name];
        let meta = &b.meta;
        let live = (meta.metageneration, meta.updated_unix_ms);
        let mut resource =
            wire::bucket_resource_with(&self.base, name, b.created_unix_ms, live, &meta.fields);
        if full {
            let owner = |scope| crate::metadata::Owner {
                scope,
                base: &self.base,
                bucket: name,
                object: None,
            };
            resource["acl"] = json!(meta.acl.items(&owner(wire::AclScope::Bucket)));
            let default = owner(wire::AclScope::DefaultObject);
            resource["defaultObjectAcl"] = json!(meta.default_object_acl.items(&default));
        }
        resource
    }

    pub(super) fn buckets_list(&mut self) -> Reply {
        let prefix = self.query.get("prefix").unwrap_or("");
        let names: Vec<String> = self
            .state
            .buckets
            .keys()
            .filter(|name| name.starts_with(prefix))
            .cloned()
            .collect();
        let full = self.full_projection();
        let items = names
            .iter()
            .map(|n| self.bucket_resource(n, full))
            .collect();
        Reply::json(200, &wire::bucket_list(items))
    }

    pub(super) fn bucket_get(&mut self, bucket: &str) -> Result<Reply, Rejection> {
        let conditions = Conditions::parse(self.query, "if")?;
        let b = self.existing(bucket)?;
        if !conditions.hold(Some((0, b.meta.metageneration))) {
            return Err(Rejection::PreconditionFailed);
        }
        let full = self.full_projection();
        Ok(Reply::json(200, &self.bucket_resource(bucket, full)))
    }

    /// `POST /storage/v1/b?project=P`: a new bucket named in the body, with the
    /// fields and ACLs it gives; 409 when it exists.
    pub(super) fn bucket_insert(&mut self, data: &[u8]) -> Result<Reply, Rejection> {
        let body = Self::json_body(data)?;
        let name = body.get("name").and_then(Value::as_str).unwrap_or("");
        check_bucket_name(name)?;
        if self.state.buckets.contains_key(name) {
            return Err(Rejection::status(409, BUCKET_EXISTS));
        }
        let project = self.query.get("project").unwrap_or(DEFAULT_PROJECT);
        let mut bucket = Bucket::in_project(project, self.now_ms);
        bucket.meta.apply(&body, Change::Replace, self.now_ms)?;
        bucket.meta.place();
        if self.query.flag("enableObjectRetention")? {
            let fields = &mut bucket.meta.fields;
            fields.insert(retention::BUCKET_FIELD.into(), retention::enabled());
        }
        self.predefined_acls(&mut bucket.meta)?;
        let name = name.to_string();
        self.state.deleted_buckets.remove(&name);
        self.state.buckets.insert(name.clone(), bucket);
        Ok(Reply::json(200, &self.bucket_resource(&name, true)))
    }

    /// `predefinedAcl` and `predefinedDefaultObjectAcl` set the bucket's lists.
    fn predefined_acls(&self, meta: &mut BucketMeta) -> Result<(), Rejection> {
        if let Some(name) = self.query.get("predefinedAcl") {
            meta.acl = Acl::predefined(name)?;
        }
        if let Some(name) = self.query.get("predefinedDefaultObjectAcl") {
            meta.default_object_acl = Acl::predefined(name)?;
        }
        Ok(())
    }

    /// `PATCH`, `PUT` or `DELETE` of a bucket, if its metageneration conditions
    /// hold. A delete needs the bucket empty, of noncurrent versions and managed
    /// folders too (409 otherwise).
    pub(super) fn bucket_change(
        &mut self,
        bucket: &str,
        verb: Verb,
        data: &[u8],
    ) -> Result<Served, Rejection> {
        let conditions = Conditions::parse(self.query, "if")?;
        let body = Self::json_body(data)?;
        let now_ms = self.now_ms;
        let b = match verb {
            // A delete never creates the bucket it deletes (404 when it is missing).
            Verb::Delete => (self.state.buckets.get_mut(bucket))
                .ok_or_else(|| Rejection::NoSuchBucket(bucket.to_string()))?,
            _ => self.existing(bucket)?,
        };
        if !conditions.hold(Some((0, b.meta.metageneration))) {
            return Err(Rejection::PreconditionFailed);
        }
        if verb == Verb::Delete {
            if !b.is_empty() {
                return Err(Rejection::status(
                    409,
                    "The bucket you tried to delete is not empty.",
                ));
            }
            self.state.buckets.remove(bucket);
            self.state.deleted_buckets.insert(bucket.to_string());
            return Ok(Reply::new(204).into());
        }
        let change = match verb {
            Verb::Update => Change::Replace,
            _ => Change::Patch,
        };
        // The metadata changes whole or not at all; the objects stay where they are.
        let mut meta = b.meta.clone();
        meta.apply(&body, change, now_ms)?;
        self.predefined_acls(&mut meta)?;
        meta.changed(now_ms);
        self.existing(bucket)?.meta = meta;
        let full = self.full_projection() || verb == Verb::Update;
        Ok(Reply::json(200, &self.bucket_resource(bucket, full)).into())
    }

    /// `lockRetentionPolicy?ifMetagenerationMatch=N` (required, as Cloud Storage
    /// requires it).
    pub(super) fn lock_retention(&mut self, bucket: &str) -> Result<Served, Rejection> {
        let conditions = Conditions::parse(self.query, "if")?;
        if conditions.if_metageneration_match.is_none() {
            return Err(Rejection::invalid("Required: ifMetagenerationMatch."));
        }
        let now_ms = self.now_ms;
        let b = self.existing(bucket)?;
        if !conditions.hold(Some((0, b.meta.metageneration))) {
            return Err(Rejection::PreconditionFailed);
        }
        b.meta.lock_retention()?;
        b.meta.changed(now_ms);
        Ok(Reply::json(200, &self.bucket_resource(bucket, false)).into())
    }

    /// `GET` or `PUT` of the bucket's IAM policy.
    pub(super) fn iam(&mut self, bucket: &str, set: bool, data: &[u8]) -> Result<Reply, Rejection> {
        let body = Self::json_body(data)?;
        let requested = self.query.get("optionsRequestedPolicyVersion");
        let requested = requested.and_then(|v| v.parse::<i64>().ok());
        let b = self.existing(bucket)?;
        if set {
            b.meta.iam.set(&body)?;
        }
        if let Some(version) = requested {
            b.meta.iam.version = b.meta.iam.version.max(version.min(3));
        }
        Ok(Reply::json(200, &b.meta.iam.json(bucket, &b.meta.project)))
    }

    /// `iam/testPermissions?permissions=...`: the fake grants every permission.
    pub(super) fn test_permissions(&mut self, bucket: &str) -> Result<Served, Rejection> {
        self.existing(bucket)?;
        let permissions: Vec<&str> = self.query.get_all("permissions").collect();
        if permissions.is_empty() {
            return Err(Rejection::invalid("Required: permissions."));
        }
        let answer = json!({
            "kind": "storage#testIamPermissionsResponse",
            "permissions": permissions,
        });
        Ok(Reply::json(200, &answer).into())
    }

    /// The bucket's notification configurations: list, insert, get, delete.
    pub(super) fn notifications(
        &mut self,
        bucket: &str,
        id: Option<&str>,
        verb: Verb,
        data: &[u8],
    ) -> Result<Served, Rejection> {
        let body = Self::json_body(data)?;
        let base = self.base.clone();
        let b = self.existing(bucket)?;
        let no_such =
            || Rejection::status(404, format!("No such notification: {}", id.unwrap_or("")));
        let id = match id {
            Some(id) => Some(id.parse::<u64>().map_err(|_| no_such())?),
            None => None,
        };
        let meta = &mut b.meta;
        let reply = match (verb, id) {
            (Verb::Insert, _) => {
                let id = meta.add_notification(&body)?;
                Reply::json(
                    200,
                    &meta
                        .notification_json(&base, bucket, id)
                        .unwrap_or_default(),
                )
            }
            (Verb::List, _) => {
                let items: Vec<Value> = meta
                    .notifications
                    .keys()
                    .filter_map(|id| meta.notification_json(&base, bucket, *id))
                    .collect();
                Reply::json(
                    200,
                    &json!({ "kind": "storage#notifications", "items": items }),
                )
            }
            (Verb::Delete, Some(id)) => match meta.notifications.remove(&id) {
                Some(_) => Reply::new(204),
                None => return Err(no_such()),
            },
            (_, Some(id)) => match meta.notification_json(&base, bucket, id) {
                Some(config) => Reply::json(200, &config),
                None => return Err(no_such()),
            },
            (_, None) => return Err(no_such()),
        };
        Ok(reply.into())
    }
}

/// Cloud Storage's rules for bucket names, in short: 3 to 63 characters (222 with
/// dots) of lower-case letters, digits, `-`, `_` and `.`, starting and ending with
/// a letter or digit; 400 naming the rule otherwise.
pub(super) fn check_bucket_name(name: &str) -> Result<(), Rejection> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let max = if name.contains('.') { 222 } else { 63 };
    if name.len() < 3 || name.len() > max {
        return Err(Rejection::invalid(format!(
            "Invalid bucket name {name:?}: a name has 3 to {max} characters."
        )));
    }
    if !name.chars().all(allowed) || !edge(name.chars().next()) || !edge(name.chars().last()) {
        return Err(Rejection::invalid(format!(
            "Invalid bucket name {name:?}: lower-case letters, digits, '-', '_' and '.', \
             starting and ending with a letter or digit."
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_cloud_storages_rules() {
        for good in ["bkt", "a.b-c_d", "0ab"] {
            assert!(check_bucket_name(good).is_ok(), "{good}");
        }
        for bad in ["", "ab", "Bkt", "-bkt", "bkt-", "b kt", &"x".repeat(64)] {
            assert!(check_bucket_name(bad).is_err(), "{bad}");
        }
    }
}
