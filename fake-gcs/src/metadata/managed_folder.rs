//! A bucket's managed folders ([`ManagedFolders`]): for each, its metageneration,
//! creation and update times and IAM policy, by name (always ending in `/`), kept
//! in name order so that lists and pages never depend on insertion or hash order.
//! Plain data and the rules for changing it; [`crate::api`] serves the requests.
//!
//! Per folder the fake keeps its name plus 24 bytes, and a boxed [`IamPolicy`]
//! once one is set; names are at most [`MAX_NAME_BYTES`], as object names are.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde_json::{Value, json};

use super::IamPolicy;
use crate::wire::{Rejection, rfc3339_millis};

/// The longest managed folder name, in bytes (Cloud Storage's limit on object names).
pub(crate) const MAX_NAME_BYTES: usize = 1024;

/// One managed folder.
#[derive(Debug, Clone)]
pub(crate) struct ManagedFolder {
    pub(crate) metageneration: i64,
    created_unix_ms: u64,
    updated_unix_ms: u64,
    /// Its IAM policy, once set (the default bindings are shown until then).
    iam: Option<Box<IamPolicy>>,
}

/// A bucket's managed folders by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct ManagedFolders {
    by_name: BTreeMap<String, ManagedFolder>,
}

/// A page of managed folder names: the names and, when more follow, the token
/// (the last name given) to resume after.
pub(crate) struct FolderPage<'a> {
    pub(crate) names: Vec<&'a str>,
    pub(crate) next: Option<&'a str>,
}

/// The name a request gives, as the service keeps it: with a trailing `/` added
/// when it has none; 400 when it is empty, too long, or has an empty segment.
pub(crate) fn folder_name(given: &str) -> Result<String, Rejection> {
    let name = match given.ends_with('/') {
        true => given.to_string(),
        false => format!("{given}/"),
    };
    if name == "/" || name.starts_with('/') || name.contains("//") {
        return Err(Rejection::invalid(format!(
            "Invalid managed folder name {given:?}: a path of non-empty segments."
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Rejection::invalid(format!(
            "Invalid managed folder name: longer than {MAX_NAME_BYTES} bytes."
        )));
    }
    Ok(name)
}

impl ManagedFolders {
    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&ManagedFolder> {
        self.by_name.get(name)
    }

    /// Creates `name` at `now_ms`; 409 when it exists.
    pub(crate) fn insert(&mut self, name: String, now_ms: u64) -> Result<(), Rejection> {
        if self.by_name.contains_key(&name) {
            return Err(Rejection::status(
                409,
                format!("The managed folder {name} already exists."),
            ));
        }
        let folder = ManagedFolder {
            metageneration: 1,
            created_unix_ms: now_ms,
            updated_unix_ms: now_ms,
            iam: None,
        };
        self.by_name.insert(name, folder);
        Ok(())
    }

    pub(crate) fn remove(&mut self, name: &str) {
        self.by_name.remove(name);
    }

    /// Whether another managed folder lies under `name`.
    pub(crate) fn has_children(&self, name: &str) -> bool {
        let after = (Bound::Excluded(name), Bound::Unbounded);
        let next = self.by_name.range::<str, _>(after).next();
        next.is_some_and(|(child, _)| child.starts_with(name))
    }

    /// Up to `size` names starting with `prefix`, after `token` when given.
    pub(crate) fn page(&self, prefix: &str, token: Option<&str>, size: usize) -> FolderPage<'_> {
        let start = match token {
            Some(token) if token >= prefix => Bound::Excluded(token),
            _ => Bound::Included(prefix),
        };
        let mut names = self
            .by_name
            .range::<str, _>((start, Bound::Unbounded))
            .map(|(name, _)| name.as_str())
            .take_while(|name| name.starts_with(prefix));
        let page: Vec<&str> = names.by_ref().take(size).collect();
        let next = match names.next() {
            Some(_) => page.last().copied(),
            None => None,
        };
        FolderPage { names: page, next }
    }

    /// The folder's IAM policy, its own or the default one.
    pub(crate) fn iam(&self, name: &str) -> Option<IamPolicy> {
        let folder = self.by_name.get(name)?;
        Some(folder.iam.as_deref().cloned().unwrap_or_default())
    }

    /// Sets the folder's IAM policy from a `setIamPolicy` body at `now_ms`
    /// (412 for a stale `etag`): its metageneration and update time move.
    pub(crate) fn set_iam(
        &mut self,
        name: &str,
        body: &serde_json::Map<String, Value>,
        now_ms: u64,
    ) -> Result<IamPolicy, Rejection> {
        let Some(folder) = self.by_name.get_mut(name) else {
            return Err(no_such_folder(name));
        };
        let mut policy = folder.iam.as_deref().cloned().unwrap_or_default();
        policy.set(body)?;
        folder.iam = Some(Box::new(policy.clone()));
        folder.metageneration += 1;
        folder.updated_unix_ms = now_ms;
        Ok(policy)
    }
}

/// 404 for a managed folder that does not exist.
pub(crate) fn no_such_folder(name: &str) -> Rejection {
    Rejection::status(404, format!("The managed folder {name} does not exist."))
}

impl ManagedFolder {
    /// The JSON API's resource for folder `name` of `bucket`, linked under `base`.
    pub(crate) fn json(&self, base: &str, bucket: &str, name: &str) -> Value {
        let encoded = crate::wire::encode_component(name);
        json!({
            "kind": "storage#managedFolder",
            "id": format!("{bucket}/{name}"),
            "selfLink": format!("{base}/storage/v1/b/{bucket}/managedFolders/{encoded}"),
            "name": name,
            "bucket": bucket,
            "metageneration": self.metageneration.to_string(),
            "createTime": rfc3339_millis(self.created_unix_ms),
            "updateTime": rfc3339_millis(self.updated_unix_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_gain_their_slash_and_pages_resume_after_the_token() {
        assert_eq!(folder_name("a/b").unwrap(), "a/b/");
        assert_eq!(folder_name("a/").unwrap(), "a/");
        for bad in ["", "/", "/a", "a//b"] {
            assert!(folder_name(bad).is_err(), "{bad}");
        }
        let mut folders = ManagedFolders::default();
        for name in ["b/", "a/", "a/x/", "c/"] {
            folders.insert(name.into(), 0).unwrap();
        }
        assert!(folders.insert("a/".into(), 1).is_err());
        assert!(folders.has_children("a/") && !folders.has_children("b/"));
        let first = folders.page("", None, 2);
        assert_eq!(
            (first.names, first.next),
            (vec!["a/", "a/x/"], Some("a/x/"))
        );
        let rest = folders.page("", Some("a/x/"), 2);
        assert_eq!((rest.names, rest.next), (vec!["b/", "c/"], None));
        assert_eq!(folders.page("a/", None, 10).names, ["a/", "a/x/"]);
    }
}
