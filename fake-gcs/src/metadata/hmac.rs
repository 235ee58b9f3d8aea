//! HMAC keys per project (`/storage/v1/projects/{project}/hmacKeys`) and the
//! project's service account. Keys are made in order (access ids
//! `GOOG1EFAKE...`, secrets derived from them: no randomness), live as `ACTIVE`
//! or `INACTIVE`, and a deleted key is kept as `DELETED` (listed only with
//! `showDeletedKeys=true`), as Cloud Storage does.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use super::acl::PROJECT_NUMBER;
use crate::wire::{Rejection, bucket_etag, encode_component, md5_hex, rfc3339_millis};

/// One key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HmacKey {
    project: String,
    service_account: String,
    state: &'static str,
    created_unix_ms: u64,
    updated_unix_ms: u64,
    /// Changes with each update: the key's ETag.
    revision: i64,
}

/// Every project's keys, by access id.
#[derive(Debug, Clone, Default)]
pub(crate) struct HmacKeys {
    keys: BTreeMap<String, HmacKey>,
    made: u64,
}

/// What a list of keys is narrowed to.
pub(crate) struct KeyFilter<'a> {
    pub(crate) project: &'a str,
    pub(crate) service_account: Option<&'a str>,
    pub(crate) show_deleted: bool,
}

impl HmacKeys {
    /// Makes a key for `service_account` in `project` at `now_ms`; the create
    /// answer (`storage#hmacKey`: metadata and secret).
    pub(crate) fn create(
        &mut self,
        base: &str,
        project: &str,
        service_account: &str,
        now_ms: u64,
    ) -> Value {
        self.made += 1;
        let access_id = format!("GOOG1EFAKE{:020}", self.made);
        let key = HmacKey {
            project: project.to_string(),
            service_account: service_account.to_string(),
            state: "ACTIVE",
            created_unix_ms: now_ms,
            updated_unix_ms: now_ms,
            revision: 1,
        };
        let metadata = key.json(base, &access_id);
        self.keys.insert(access_id.clone(), key);
        let secret = B64.encode(md5_hex(&crate::wire::Digests::of(access_id.as_bytes()).md5));
        json!({ "kind": "storage#hmacKey", "metadata": metadata, "secret": secret })
    }

    /// The key `access_id` of `project`, as its metadata; 404 when there is none.
    pub(crate) fn get(
        &self,
        base: &str,
        project: &str,
        access_id: &str,
    ) -> Result<Value, Rejection> {
        Ok(self.key(project, access_id)?.json(base, access_id))
    }

    /// The keys the filter picks, in access id order, at most `max` after
    /// `after`; and where the next page resumes.
    pub(crate) fn list(
        &self,
        base: &str,
        filter: &KeyFilter<'_>,
        after: Option<&str>,
        max: usize,
    ) -> (Vec<Value>, Option<String>) {
        let picked = self.keys.iter().filter(|(id, key)| {
            key.project == filter.project
                && filter
                    .service_account
                    .is_none_or(|sa| sa == key.service_account)
                && (filter.show_deleted || key.state != "DELETED")
                && after.is_none_or(|after| id.as_str() > after)
        });
        let mut items = Vec::new();
        for (id, key) in picked {
            if items.len() == max {
                let next = last_id(&items);
                return (items, Some(next));
            }
            items.push(key.json(base, id));
        }
        (items, None)
    }

    /// Sets a key's state from an update body (`{"state": "INACTIVE", "etag":
    /// ...}`): 404 for a deleted key, 412 for an ETag that is not the key's, 400
    /// for a state other than `ACTIVE` or `INACTIVE`.
    pub(crate) fn update(
        &mut self,
        base: &str,
        project: &str,
        access_id: &str,
        body: &Map<String, Value>,
        now_ms: u64,
    ) -> Result<Value, Rejection> {
        let key = self.key_mut(project, access_id)?;
        // storage-testbench forgets a deleted key, so its update is 404 there;
        // the official clients' conformance teardowns (set INACTIVE, delete,
        // pass on NotFound) count on it. The fake answers the same.
        if key.state == "DELETED" {
            return Err(no_such_key(access_id));
        }
        if let Some(etag) = body.get("etag").and_then(Value::as_str)
            && etag != bucket_etag(key.revision)
        {
            return Err(Rejection::PreconditionFailed);
        }
        let state = match body.get("state").and_then(Value::as_str) {
            Some("ACTIVE") => "ACTIVE",
            Some("INACTIVE") => "INACTIVE",
            other => {
                return Err(Rejection::invalid(format!(
                    "Invalid argument: state must be ACTIVE or INACTIVE, got {other:?}."
                )));
            }
        };
        key.state = state;
        key.revision += 1;
        key.updated_unix_ms = now_ms;
        Ok(key.json(base, access_id))
    }

    /// Deletes an `INACTIVE` key (it stays listed as `DELETED`); 400 for an
    /// active one, 404 for one that is not there or already deleted.
    pub(crate) fn delete(
        &mut self,
        project: &str,
        access_id: &str,
        now_ms: u64,
    ) -> Result<(), Rejection> {
        let key = self.key_mut(project, access_id)?;
        match key.state {
            "ACTIVE" => Err(Rejection::invalid("Cannot delete keys in 'ACTIVE' state.")),
            "DELETED" => Err(no_such_key(access_id)),
            _ => {
                key.state = "DELETED";
                key.revision += 1;
                key.updated_unix_ms = now_ms;
                Ok(())
            }
        }
    }

    fn key(&self, project: &str, access_id: &str) -> Result<&HmacKey, Rejection> {
        self.keys
            .get(access_id)
            .filter(|k| k.project == project)
            .ok_or_else(|| no_such_key(access_id))
    }

    fn key_mut(&mut self, project: &str, access_id: &str) -> Result<&mut HmacKey, Rejection> {
        self.keys
            .get_mut(access_id)
            .filter(|k| k.project == project)
            .ok_or_else(|| no_such_key(access_id))
    }
}

fn last_id(items: &[Value]) -> String {
    items
        .last()
        .and_then(|k| k["accessId"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn no_such_key(access_id: &str) -> Rejection {
    Rejection::status(404, format!("Access ID not found: {access_id}"))
}

impl HmacKey {
    fn json(&self, base: &str, access_id: &str) -> Value {
        json!({
            "kind": "storage#hmacKeyMetadata",
            "id": format!("{}/{access_id}", self.project),
            "selfLink": format!(
                "{base}/storage/v1/projects/{}/hmacKeys/{access_id}",
                encode_component(&self.project)
            ),
            "accessId": access_id,
            "projectId": self.project,
            "serviceAccountEmail": self.service_account,
            "state": self.state,
            "timeCreated": rfc3339_millis(self.created_unix_ms),
            "updated": rfc3339_millis(self.updated_unix_ms),
            "etag": bucket_etag(self.revision),
        })
    }
}

/// The project's Cloud Storage service account, as `serviceAccount: get` answers.
pub(crate) fn service_account() -> Value {
    json!({
        "kind": "storage#serviceAccount",
        "email_address": format!("service-{PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_lives_is_deactivated_then_deleted() {
        let mut keys = HmacKeys::default();
        let made = keys.create("http://h", "p", "sa@p.iam", 0);
        let id = made["metadata"]["accessId"].as_str().unwrap().to_string();
        assert_eq!(made["metadata"]["state"], "ACTIVE");
        assert!(!made["secret"].as_str().unwrap().is_empty());
        assert!(
            keys.get("http://h", "other", &id).is_err(),
            "keys belong to their project"
        );
        assert!(
            keys.delete("p", &id, 1).is_err(),
            "an active key cannot be deleted"
        );
        let stale = json!({ "state": "INACTIVE", "etag": "CAk=" });
        let stale = stale.as_object().unwrap();
        assert_eq!(
            keys.update("http://h", "p", &id, stale, 1),
            Err(Rejection::PreconditionFailed)
        );
        let inactive = json!({ "state": "INACTIVE" });
        let updated = keys
            .update("http://h", "p", &id, inactive.as_object().unwrap(), 1)
            .unwrap();
        assert_eq!(updated["state"], "INACTIVE");
        keys.delete("p", &id, 2).unwrap();
        let filter = |show_deleted| KeyFilter {
            project: "p",
            service_account: None,
            show_deleted,
        };
        assert!(keys.list("http://h", &filter(false), None, 10).0.is_empty());
        assert_eq!(
            keys.list("http://h", &filter(true), None, 10).0[0]["state"],
            "DELETED"
        );
    }

    #[test]
    fn lists_page_in_access_id_order() {
        let mut keys = HmacKeys::default();
        for _ in 0..3 {
            keys.create("http://h", "p", "sa@p.iam", 0);
        }
        let filter = KeyFilter {
            project: "p",
            service_account: Some("sa@p.iam"),
            show_deleted: false,
        };
        let (first, next) = keys.list("http://h", &filter, None, 2);
        assert_eq!(first.len(), 2);
        let (rest, end) = keys.list("http://h", &filter, next.as_deref(), 2);
        assert_eq!((rest.len(), end), (1, None));
    }
}
