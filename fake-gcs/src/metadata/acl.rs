//! Access control lists as the fake keeps them: ordered entries of an entity
//! (`user-a@b.c`, `allUsers`, `project-owners-0`, ...) and a role, the predefined
//! lists (`predefinedAcl=publicRead`, ...), and each entry as the JSON API shows
//! it. The fake grants every request whatever the lists say: they are kept and
//! shown, not enforced.

use serde_json::{Map, Value, json};

use crate::wire::{AclScope, Rejection, bucket_etag};

/// The project number the fake shows (`projectNumber`, `project-owners-0`).
pub(crate) const PROJECT_NUMBER: &str = "0";

/// One entry of an access control list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AccessControl {
    pub(crate) entity: String,
    pub(crate) role: String,
}

/// An access control list, in the order entries were added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Acl {
    entries: Vec<AccessControl>,
}

/// Where an entry is shown: the scope and the names its `id` and links use.
pub(crate) struct Owner<'a> {
    pub(crate) scope: AclScope,
    pub(crate) base: &'a str,
    pub(crate) bucket: &'a str,
    /// The object and its generation, for [`AclScope::Object`].
    pub(crate) object: Option<(&'a str, i64)>,
}

impl Acl {
    /// The list a new bucket, and its default object ACL, start with (Cloud
    /// Storage's `projectPrivate`).
    pub(crate) fn project_private() -> Acl {
        let team = |team, role: &str| AccessControl {
            entity: format!("project-{team}-{PROJECT_NUMBER}"),
            role: role.to_string(),
        };
        Acl {
            entries: vec![
                team("owners", "OWNER"),
                team("editors", "OWNER"),
                team("viewers", "READER"),
            ],
        }
    }

    /// A predefined list by its JSON API name (`private`, `projectPrivate`,
    /// `publicRead`, `publicReadWrite`, `authenticatedRead`, `bucketOwnerRead`,
    /// `bucketOwnerFullControl`); 400 naming it when there is no such list.
    pub(crate) fn predefined(name: &str) -> Result<Acl, Rejection> {
        let owners = AccessControl {
            entity: format!("project-owners-{PROJECT_NUMBER}"),
            role: "OWNER".into(),
        };
        let mut acl = match name {
            "private" | "bucketOwnerRead" | "bucketOwnerFullControl" => Acl {
                entries: vec![owners],
            },
            "projectPrivate" | "publicRead" | "publicReadWrite" | "authenticatedRead" => {
                Acl::project_private()
            }
            other => {
                return Err(Rejection::invalid(format!(
                    "Invalid argument: the predefined ACL {other:?} does not exist."
                )));
            }
        };
        match name {
            "publicRead" => acl.upsert("allUsers", "READER"),
            "publicReadWrite" => acl.upsert("allUsers", "WRITER"),
            "authenticatedRead" => acl.upsert("allAuthenticatedUsers", "READER"),
            _ => {}
        }
        Ok(acl)
    }

    /// The list a resource's `acl` field gives (an array of `{entity, role}`);
    /// 400 naming the entry that is not one.
    pub(crate) fn from_json(value: &Value) -> Result<Acl, Rejection> {
        let Value::Array(items) = value else {
            return Err(Rejection::invalid(
                "Invalid argument: acl must be an array.",
            ));
        };
        let mut acl = Acl::default();
        for (i, item) in items.iter().enumerate() {
            let (entity, role) = entry_fields(item).ok_or_else(|| {
                Rejection::invalid(format!("Required: acl[{i}].entity and acl[{i}].role."))
            })?;
            acl.upsert(entity, role);
        }
        Ok(acl)
    }

    /// The entry for `entity`, if any.
    pub(crate) fn get(&self, entity: &str) -> Option<&AccessControl> {
        self.entries.iter().find(|e| e.entity == entity)
    }

    /// Sets `entity`'s role, adding the entity at the end when it is new.
    pub(crate) fn upsert(&mut self, entity: &str, role: &str) {
        let role = role.to_ascii_uppercase();
        match self.entries.iter_mut().find(|e| e.entity == entity) {
            Some(entry) => entry.role = role,
            None => self.entries.push(AccessControl {
                entity: entity.to_string(),
                role,
            }),
        }
    }

    /// Removes `entity`; false when it had no entry.
    pub(crate) fn remove(&mut self, entity: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.entity != entity);
        self.entries.len() != before
    }

    /// Every entry as the JSON API shows it.
    pub(crate) fn items(&self, owner: &Owner<'_>) -> Vec<Value> {
        self.entries.iter().map(|e| e.json(owner)).collect()
    }

    /// The list as a collection answer (`storage#bucketAccessControls`, ...).
    pub(crate) fn list_json(&self, owner: &Owner<'_>) -> Value {
        let kind = match owner.scope {
            AclScope::Bucket => "storage#bucketAccessControls",
            AclScope::DefaultObject | AclScope::Object => "storage#objectAccessControls",
        };
        json!({ "kind": kind, "items": self.items(owner) })
    }
}

/// The entity and role of an entry as a request body gives it.
pub(crate) fn entry_fields(item: &Value) -> Option<(&str, &str)> {
    let entity = item.get("entity")?.as_str().filter(|e| !e.is_empty())?;
    let role = item.get("role")?.as_str().filter(|r| !r.is_empty())?;
    Some((entity, role))
}

impl AccessControl {
    /// The entry as the JSON API shows it: kind, id, link, owner, entity, role,
    /// and what the entity names (`email`, `domain`, `projectTeam`).
    pub(crate) fn json(&self, owner: &Owner<'_>) -> Value {
        let b = crate::wire::encode_component(owner.bucket);
        let e = crate::wire::encode_component(&self.entity);
        let mut fields = Map::new();
        let (kind, id, link) = match (owner.scope, owner.object) {
            (AclScope::Object, Some((object, generation))) => {
                let o = crate::wire::encode_component(object);
                fields.insert("object".into(), json!(object));
                fields.insert("generation".into(), json!(generation.to_string()));
                (
                    "storage#objectAccessControl",
                    format!("{}/{object}/{generation}/{}", owner.bucket, self.entity),
                    format!("{}/storage/v1/b/{b}/o/{o}/acl/{e}", owner.base),
                )
            }
            (AclScope::Bucket, _) => (
                "storage#bucketAccessControl",
                format!("{}/{}", owner.bucket, self.entity),
                format!("{}/storage/v1/b/{b}/acl/{e}", owner.base),
            ),
            _ => (
                "storage#objectAccessControl",
                format!("{}/{}", owner.bucket, self.entity),
                format!("{}/storage/v1/b/{b}/defaultObjectAcl/{e}", owner.base),
            ),
        };
        fields.insert("kind".into(), json!(kind));
        fields.insert("id".into(), json!(id));
        fields.insert("selfLink".into(), json!(link));
        fields.insert("bucket".into(), json!(owner.bucket));
        fields.insert("entity".into(), json!(self.entity));
        fields.insert("role".into(), json!(self.role));
        fields.insert("etag".into(), json!(bucket_etag(1)));
        self.describe_entity(&mut fields);
        Value::Object(fields)
    }

    fn describe_entity(&self, fields: &mut Map<String, Value>) {
        let entity = self.entity.as_str();
        if let Some(email) = entity
            .strip_prefix("user-")
            .or_else(|| entity.strip_prefix("group-"))
            .filter(|e| e.contains('@'))
        {
            fields.insert("email".into(), json!(email));
        } else if let Some(domain) = entity.strip_prefix("domain-") {
            fields.insert("domain".into(), json!(domain));
        } else if let Some(rest) = entity.strip_prefix("project-")
            && let Some((team, number)) = rest.split_once('-')
        {
            let team = json!({ "projectNumber": number, "team": team });
            fields.insert("projectTeam".into(), team);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket_owner() -> Owner<'static> {
        Owner {
            scope: AclScope::Bucket,
            base: "http://h",
            bucket: "bkt",
            object: None,
        }
    }

    #[test]
    fn entries_are_added_replaced_and_removed_in_order() {
        let mut acl = Acl::project_private();
        acl.upsert("user-a@b.c", "reader");
        acl.upsert("project-viewers-0", "WRITER");
        assert_eq!(acl.get("user-a@b.c").unwrap().role, "READER");
        assert_eq!(acl.get("project-viewers-0").unwrap().role, "WRITER");
        assert!(acl.remove("user-a@b.c"));
        assert!(!acl.remove("user-a@b.c"));
        assert_eq!(acl, {
            let mut expected = Acl::project_private();
            expected.upsert("project-viewers-0", "WRITER");
            expected
        });
    }

    #[test]
    fn predefined_lists_and_bodies_parse_or_name_the_problem() {
        let public = Acl::predefined("publicRead").unwrap();
        assert_eq!(public.get("allUsers").unwrap().role, "READER");
        assert!(
            Acl::predefined("private")
                .unwrap()
                .get("allUsers")
                .is_none()
        );
        assert!(Acl::predefined("everyone").is_err());
        let body = json!([{ "entity": "allUsers", "role": "READER" }]);
        assert_eq!(
            Acl::from_json(&body).unwrap().get("allUsers").unwrap().role,
            "READER"
        );
        let Err(Rejection::Status {
            message: Some(m), ..
        }) = Acl::from_json(&json!([{}]))
        else {
            panic!("an entry without entity was taken");
        };
        assert!(m.contains("acl[0].entity"), "{m}");
    }

    #[test]
    fn an_entry_is_shown_with_what_its_entity_names() {
        let entry = AccessControl {
            entity: "user-a@b.c".into(),
            role: "OWNER".into(),
        };
        let shown = entry.json(&bucket_owner());
        assert_eq!(shown["kind"], "storage#bucketAccessControl");
        assert_eq!(shown["email"], "a@b.c");
        assert_eq!(
            shown["selfLink"],
            "http://h/storage/v1/b/bkt/acl/user-a%40b.c"
        );
        let team = AccessControl {
            entity: "project-owners-0".into(),
            role: "OWNER".into(),
        };
        let object = Owner {
            scope: AclScope::Object,
            object: Some(("o", 7)),
            ..bucket_owner()
        };
        let shown = team.json(&object);
        assert_eq!(shown["projectTeam"]["team"], "owners");
        assert_eq!(shown["generation"], "7");
        assert_eq!(shown["id"], "bkt/o/7/project-owners-0");
    }
}
