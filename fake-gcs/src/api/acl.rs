//! Access control lists through the JSON API: a bucket's, its default object
//! ACL, and an object's. Insert, update and patch set an entity's role (adding it
//! when new, as the storage-testbench does); delete removes it (404 when absent).
//! A change counts a metageneration of the bucket or the object. An object's ACL
//! calls take `generation` (a noncurrent version's ACL, in a versioned bucket).
//! In a bucket with uniform bucket-level access every ACL call is 400, reads
//! included, as the service refuses them (its IAM policy alone grants access).

use serde_json::{Map, Value};

use super::{Ctx, Served};
use crate::metadata::{Acl, Owner, entry_fields};
use crate::wire::{AclScope, MetaRoute, Rejection, Reply, Verb};

impl Ctx<'_> {
    /// Serves a [`MetaRoute::Acl`] request.
    pub(super) fn acl(&mut self, route: &MetaRoute, data: &[u8]) -> Result<Served, Rejection> {
        let MetaRoute::Acl {
            scope,
            bucket,
            object,
            entity,
            verb,
        } = route
        else {
            return Err(Rejection::status(500, "not an ACL request"));
        };
        let body = Self::json_body(data)?;
        let generation = self.generation_param("generation")?;
        let (base, now_ms) = (self.base.clone(), self.now_ms);
        let b = self.existing(bucket)?;
        if b.meta.uniform_access() {
            return Err(legacy_acl_refused(*scope));
        }
        let request = Request {
            entity: entity.as_deref(),
            verb: *verb,
            body: &body,
        };
        let owner = |scope, object| Owner {
            scope,
            base: &base,
            bucket,
            object,
        };
        let (reply, changed) = match (scope, object) {
            (AclScope::Object, Some(name)) => {
                let default = b.meta.default_object_acl.clone();
                let no_such_object = || Rejection::NoSuchObject {
                    bucket: bucket.clone(),
                    name: name.clone(),
                };
                let stored = b.version_mut(name, generation).ok_or_else(no_such_object)?;
                let mut edit = stored.edit();
                let mut acl = edit.changes.acl.clone().unwrap_or(default);
                let at = owner(AclScope::Object, Some((name.as_str(), stored.generation)));
                let (reply, changed) = request.apply(&mut acl, &at)?;
                if changed {
                    edit.changes.acl = Some(acl);
                    edit.changed(now_ms);
                    stored.set_edit(edit);
                }
                return Ok(reply.into());
            }
            (AclScope::Bucket, _) => request.apply(&mut b.meta.acl, &owner(*scope, None))?,
            (_, _) => request.apply(&mut b.meta.default_object_acl, &owner(*scope, None))?,
        };
        if changed {
            b.meta.changed(now_ms);
        }
        Ok(reply.into())
    }
}

/// One ACL request: its entity (for a member's verbs), verb and body.
struct Request<'a> {
    entity: Option<&'a str>,
    verb: Verb,
    body: &'a Map<String, Value>,
}

impl Request<'_> {
    /// Applies the request to `acl`: the answer, and whether the list changed.
    fn apply(&self, acl: &mut Acl, owner: &Owner<'_>) -> Result<(Reply, bool), Rejection> {
        let entity = self.entity.unwrap_or("");
        let no_such_entity = || Rejection::status(404, format!("No such ACL entity: {entity}"));
        match self.verb {
            Verb::List => Ok((Reply::json(200, &acl.list_json(owner)), false)),
            Verb::Get => {
                let entry = acl.get(entity).ok_or_else(no_such_entity)?;
                Ok((Reply::json(200, &entry.json(owner)), false))
            }
            Verb::Delete => match acl.remove(entity) {
                true => Ok((Reply::new(204), true)),
                false => Err(no_such_entity()),
            },
            Verb::Insert => {
                let value = Value::Object(self.body.clone());
                let (entity, role) = entry_fields(&value)
                    .ok_or_else(|| Rejection::invalid("Required: entity and role."))?;
                acl.upsert(entity, role);
                let entry = acl.get(entity).expect("just set");
                Ok((Reply::json(200, &entry.json(owner)), true))
            }
            Verb::Update | Verb::Patch => {
                let role = self
                    .body
                    .get("role")
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty())
                    .ok_or_else(|| Rejection::invalid("Required: role."))?;
                acl.upsert(entity, role);
                let entry = acl.get(entity).expect("just set");
                Ok((Reply::json(200, &entry.json(owner)), true))
            }
        }
    }
}

/// The service's 400 for an ACL call in a bucket with uniform bucket-level access.
fn legacy_acl_refused(scope: AclScope) -> Rejection {
    let of = match scope {
        AclScope::Object => "an object",
        _ => "a bucket",
    };
    Rejection::status(
        400,
        format!(
            "Cannot use legacy ACL for {of} when uniform bucket-level access is enabled. \
             Read more at https://cloud.google.com/storage/docs/uniform-bucket-level-access"
        ),
    )
}
