//! Objects' metadata through the JSON API: patch and update (a new
//! metageneration of the live generation), copy and rewrite (a new generation of
//! the destination, with the source's bytes and metadata, or the metadata the
//! request gives), move (a rename within the bucket, in one step under the lock:
//! the destination a new generation with the source's bytes and metadata, the
//! source deleted). Preconditions: `ifGenerationMatch`, `ifGenerationNotMatch`,
//! `ifMetagenerationMatch`, `ifMetagenerationNotMatch` on the object (the
//! destination), the `ifSource...` ones on a copy's or move's source.

use serde_json::{Map, Value, json};

use super::{Ctx, Served};
use crate::bucket::StoredObject;
use crate::metadata::retention::{self, Retention};
use crate::metadata::{Acl, ObjectChanges, ObjectEdit, Owner};
use crate::wire::{
    AclScope, Conditions, MetaRoute, ObjectMeta, ObjectRecord, Rejection, Reply, Verb,
    rfc3339_millis,
};

impl Ctx<'_> {
    /// The object resource of `record` in `bucket`, with what metadata calls
    /// changed (`meta`), and its ACL for the full projection.
    pub(super) fn object_resource(
        &self,
        bucket: &str,
        record: &ObjectRecord,
        meta: Option<&ObjectMeta>,
    ) -> Value {
        let mut resource = record.json_resource_with(&self.base, bucket, meta);
        if self.full_projection()
            && let Some(b) = self.state.buckets.get(bucket)
        {
            let stored = b.version(&record.name, Some(record.generation));
            let acl = stored
                .and_then(|v| v.object.changes())
                .and_then(|c| c.acl.as_ref())
                .unwrap_or(&b.meta.default_object_acl);
            let owner = Owner {
                scope: AclScope::Object,
                base: &self.base,
                bucket,
                object: Some((&record.name, record.generation)),
            };
            resource["acl"] = json!(acl.items(&owner));
        }
        resource
    }

    /// The resource of `record`, just written or changed in `bucket`, with what
    /// the bucket holds for its version: what it was given as it was written (a
    /// hold, a retention expiration), what metadata calls changed, and a
    /// noncurrent version's `timeDeleted`.
    pub(super) fn written_resource(&self, bucket: &str, record: &ObjectRecord) -> Value {
        let meta = (self.state.buckets.get(bucket))
            .and_then(|b| b.version(&record.name, Some(record.generation)))
            .and_then(|v| v.meta());
        self.object_resource(bucket, record, meta.as_ref())
    }

    /// `PATCH` or `PUT` of the live object's metadata, if the preconditions hold.
    pub(super) fn object_change(
        &mut self,
        bucket: &str,
        name: &str,
        verb: Verb,
        data: &[u8],
    ) -> Result<Served, Rejection> {
        let conditions = Conditions::parse(self.query, "if")?;
        let generation = self.generation_param("generation")?;
        let predefined = self.query.get("predefinedAcl").map(Acl::predefined);
        let predefined = predefined.transpose()?;
        let body = Self::json_body(data)?;
        let now_ms = self.now_ms;
        let live = self.stored_version(bucket, name, generation)?.live();
        if !conditions.hold(Some(live)) {
            self.state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        let b = self.existing(bucket)?;
        let (period, enabled) = (b.retention_period_ms(), b.object_retention());
        let overridden = self.query.flag("overrideUnlockedRetention")?;
        let stored = self.stored_version(bucket, name, generation)?;
        let was_held = stored.flag("eventBasedHold");
        let mut edit = stored.edit();
        edit.apply(&body, verb == Verb::Update)?;
        let retained = Retention::of(&edit.changes.meta.extra)?;
        retention::check_change(enabled, stored.retention(), retained, overridden)?;
        if retained.is_none() {
            edit.changes.meta.extra.remove(retention::OBJECT_FIELD);
        }
        let extra = &mut edit.changes.meta.extra;
        let held = extra.get("eventBasedHold").and_then(Value::as_bool) == Some(true);
        if let Some(period) = period.filter(|_| was_held && !held) {
            // Releasing an event-based hold starts the retention period.
            let expires = rfc3339_millis(now_ms.saturating_add(period));
            extra.insert("retentionExpirationTime".into(), json!(expires));
        }
        if let Some(acl) = predefined {
            edit.changes.acl = Some(acl);
        }
        edit.changed(now_ms);
        stored.set_edit(edit);
        let record = stored.record(name);
        Ok(Reply::json(200, &self.written_resource(bucket, &record)).into())
    }

    /// The object `bucket/name`: its live version, or version `generation`
    /// (live or noncurrent) when one is asked for.
    fn stored_version(
        &mut self,
        bucket: &str,
        name: &str,
        generation: Option<i64>,
    ) -> Result<&mut StoredObject, Rejection> {
        let no_such_object = || Rejection::NoSuchObject {
            bucket: bucket.to_string(),
            name: name.to_string(),
        };
        self.existing(bucket)?
            .version_mut(name, generation)
            .ok_or_else(no_such_object)
    }

    /// An integer query parameter; 400 naming it when it is not one.
    pub(super) fn generation_param(&self, key: &str) -> Result<Option<i64>, Rejection> {
        self.query
            .get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| Rejection::invalid(format!("Invalid argument: {key}={v:?}.")))
            })
            .transpose()
    }

    /// `copyTo` or `rewriteTo`: the source's bytes become a new generation of the
    /// destination, with the source's content type and attributes changed by the
    /// resource the body gives (a rewrite's `storageClass` too). A rewrite is done
    /// in one call.
    pub(super) fn copy(&mut self, route: &MetaRoute, data: &[u8]) -> Result<Served, Rejection> {
        let MetaRoute::Copy {
            rewrite,
            source_bucket,
            source,
            bucket,
            name,
        } = route
        else {
            return Err(Rejection::status(500, "not a copy request"));
        };
        let body = Self::json_body(data)?;
        let destination = Conditions::parse(self.query, "if")?;
        let source_conditions = Conditions::parse(self.query, "ifSource")?;
        let source_generation = self.generation_param("sourceGeneration")?;
        let predefined = self.query.get("destinationPredefinedAcl");
        let predefined = predefined.map(Acl::predefined).transpose()?;
        self.existing(bucket)?;
        let src = self.stored_version(source_bucket, source, source_generation)?;
        let (src_live, src) = (src.live(), src.clone());
        let current = self.state.buckets[bucket]
            .objects
            .get(name)
            .map(StoredObject::live);
        if !source_conditions.hold(Some(src_live)) || !destination.hold(current) {
            self.state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        self.state.buckets[bucket].protect(bucket, name, self.now_ms)?;
        let edit = self.copied_metadata(&src, &body, predefined)?;
        let record = self.place_copy(bucket, name, &src, edit);
        let meta = self.state.buckets[bucket].objects[name].meta().cloned();
        let resource = self.object_resource(bucket, &record, meta.as_ref());
        let answer = match rewrite {
            false => resource,
            true => json!({
                "kind": "storage#rewriteResponse",
                "totalBytesRewritten": record.size.to_string(),
                "objectSize": record.size.to_string(),
                "done": true,
                "resource": resource,
            }),
        };
        Ok(Served {
            committed: true,
            object: Some(record.name),
            ..Reply::json(200, &answer).into()
        })
    }

    /// `moveTo`: `source` becomes `name` in `bucket`, atomically, if the
    /// preconditions hold and no hold or retention protects the source or the
    /// object it replaces. The destination is a new generation (metageneration
    /// 1, created and updated now) with the source's bytes and metadata; the
    /// source is deleted as a delete without a generation deletes it (under
    /// versioning it stays noncurrent). Answers the destination's resource.
    pub(super) fn move_object(
        &mut self,
        bucket: &str,
        source: &str,
        name: &str,
    ) -> Result<Served, Rejection> {
        if source == name {
            return Err(Rejection::invalid(format!(
                "The source and destination object names must be different: {name:?}."
            )));
        }
        let destination = Conditions::parse(self.query, "if")?;
        let source_conditions = Conditions::parse(self.query, "ifSource")?;
        let now_ms = self.now_ms;
        let src = self.stored_version(bucket, source, None)?.clone();
        let b = &self.state.buckets[bucket];
        let current = b.objects.get(name).map(StoredObject::live);
        if !source_conditions.hold(Some(src.live())) || !destination.hold(current) {
            self.state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        b.protect(bucket, source, now_ms)?;
        b.protect(bucket, name, now_ms)?;
        let mut edit = src.edit();
        edit.changes.meta.metageneration = 1;
        edit.changes.meta.updated_unix_ms = now_ms;
        // The bucket gives the new object its own (a hold, a retention expiration).
        edit.changes.meta.extra.remove("retentionExpirationTime");
        let record = self.place_copy(bucket, name, &src, edit);
        self.existing(bucket)?.delete_live(source, now_ms);
        let resource = self.written_resource(bucket, &record);
        Ok(Served {
            committed: true,
            object: Some(record.name),
            ..Reply::json(200, &resource).into()
        })
    }

    /// The destination's metadata: the source's content type and attributes,
    /// changed by `body`; its storage class when the body names one.
    pub(super) fn copied_metadata(
        &self,
        src: &StoredObject,
        body: &Map<String, Value>,
        predefined: Option<Acl>,
    ) -> Result<ObjectEdit, Rejection> {
        let from_source = src.edit();
        let mut edit = ObjectEdit {
            content_type: from_source.content_type,
            attributes: from_source.attributes,
            changes: ObjectChanges {
                meta: ObjectMeta {
                    metageneration: 1,
                    updated_unix_ms: self.now_ms,
                    storage_class: src.meta().and_then(|m| m.storage_class.clone()),
                    ..ObjectMeta::default()
                },
                acl: predefined,
            },
        };
        edit.apply(body, false)?;
        // A destination's retention is not taken from the copy's resource.
        edit.changes.meta.extra.remove(retention::OBJECT_FIELD);
        if let Some(class) = body.get("storageClass").and_then(Value::as_str) {
            edit.changes.meta.storage_class = Some(class.to_ascii_uppercase());
        }
        Ok(edit)
    }

    /// Stores `src`'s bytes (or, without kept bytes, its digests and size) as a
    /// new generation of `bucket/name` described by `edit`, encrypted with the
    /// key `destinationKmsKeyName` names (a copy's or rewrite's parameter), if any.
    pub(super) fn place_copy(
        &mut self,
        bucket: &str,
        name: &str,
        src: &StoredObject,
        edit: ObjectEdit,
    ) -> ObjectRecord {
        let now_ms = self.now_ms;
        let mut given = Map::new();
        if let Some(key) = self.query.get("destinationKmsKeyName") {
            given.insert("kmsKeyName".into(), json!(key));
        }
        let generation = self.state.next_generation(now_ms);
        let record = ObjectRecord {
            generation,
            created_unix_ms: now_ms,
            content_type: edit.content_type.clone(),
            attributes: edit.attributes.clone().boxed(),
            ..src.record(name)
        };
        let (key, mut stored) = StoredObject::new(record.clone(), src.bytes.clone());
        let changes = &edit.changes;
        if changes.acl.is_some()
            || changes.meta.storage_class.is_some()
            || !changes.meta.extra.is_empty()
        {
            stored.set_edit(edit);
        }
        self.state.stats.objects_committed += 1;
        if let Some(b) = self.state.buckets.get_mut(bucket) {
            stored.add_fields(b.new_object_fields(now_ms, given));
            b.put(key, stored, now_ms);
        }
        record
    }
}
