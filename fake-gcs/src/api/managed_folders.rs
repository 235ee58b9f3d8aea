//! Managed folders through the JSON API (`storage.managedFolders.*`): insert, get,
//! list, delete and the IAM policy, under the lock like every other call. It owns
//! the rules Cloud Storage documents for them: only a bucket with uniform
//! bucket-level access takes one (400 otherwise); a name gains its trailing `/`;
//! a folder with objects or managed folders under it is deleted only with
//! `allowNonEmpty=true` (409 otherwise), and the objects stay; `ifMetageneration*`
//! hold against the folder's metageneration, which a set IAM policy moves.

use serde_json::{Map, Value, json};

use super::{Ctx, Served};
use crate::metadata::managed_folder::{folder_name, no_such_folder};
use crate::wire::{Conditions, Rejection, Reply, Verb};

/// The most folders one list answers, and the default.
const MAX_PAGE: usize = 1000;

impl Ctx<'_> {
    /// A managed folders request: list, insert, get or delete.
    pub(super) fn managed_folders(
        &mut self,
        bucket: &str,
        folder: Option<&str>,
        verb: Verb,
        data: &[u8],
    ) -> Result<Served, Rejection> {
        let folder = folder.map(folder_name).transpose()?;
        let folder = folder.as_deref();
        let reply = match (verb, folder) {
            (Verb::Insert, _) => self.folder_insert(bucket, data)?,
            (Verb::List, _) => self.folder_list(bucket)?,
            (Verb::Delete, Some(folder)) => self.folder_delete(bucket, folder)?,
            (_, Some(folder)) => self.folder_get(bucket, folder)?,
            (_, None) => return Err(no_such_folder("")),
        };
        Ok(reply.into())
    }

    fn folder_insert(&mut self, bucket: &str, data: &[u8]) -> Result<Reply, Rejection> {
        let body = Self::json_body(data)?;
        let given = body.get("name").and_then(Value::as_str).unwrap_or("");
        let name = folder_name(given)?;
        let now_ms = self.now_ms;
        let b = self.existing(bucket)?;
        if !b.meta.uniform_access() {
            return Err(Rejection::invalid(
                "Managed folders can only be created in buckets with uniform \
                 bucket-level access enabled.",
            ));
        }
        b.folders.insert(name.clone(), now_ms)?;
        self.folder_get(bucket, &name)
    }

    fn folder_get(&mut self, bucket: &str, name: &str) -> Result<Reply, Rejection> {
        let conditions = Conditions::parse(self.query, "if")?;
        let base = self.base.clone();
        let b = self.existing(bucket)?;
        let folder = b.folders.get(name).ok_or_else(|| no_such_folder(name))?;
        if !conditions.hold(Some((0, folder.metageneration))) {
            return Err(Rejection::PreconditionFailed);
        }
        Ok(Reply::json(200, &folder.json(&base, bucket, name)))
    }

    /// `?prefix=&pageToken=&pageSize=`: names in order, a page at a time.
    fn folder_list(&mut self, bucket: &str) -> Result<Reply, Rejection> {
        let size = match self.query.get("pageSize") {
            Some(size) => size
                .parse::<usize>()
                .map_err(|_| Rejection::invalid(format!("Invalid value for pageSize: {size:?}")))?,
            None => MAX_PAGE,
        };
        let size = size.clamp(1, MAX_PAGE);
        let prefix = self.query.get("prefix").unwrap_or("").to_string();
        let token = self.query.get("pageToken").map(str::to_string);
        let base = self.base.clone();
        let b = self.existing(bucket)?;
        let page = b.folders.page(&prefix, token.as_deref(), size);
        let items: Vec<Value> = (page.names.iter())
            .filter_map(|name| Some(b.folders.get(name)?.json(&base, bucket, name)))
            .collect();
        let mut answer = json!({ "kind": "storage#managedFolders", "items": items });
        if let Some(next) = page.next {
            answer["nextPageToken"] = json!(next);
        }
        Ok(Reply::json(200, &answer))
    }

    fn folder_delete(&mut self, bucket: &str, name: &str) -> Result<Reply, Rejection> {
        let conditions = Conditions::parse(self.query, "if")?;
        let allow_non_empty = self.query.flag("allowNonEmpty")?;
        let b = self.existing(bucket)?;
        let folder = b.folders.get(name).ok_or_else(|| no_such_folder(name))?;
        if !conditions.hold(Some((0, folder.metageneration))) {
            return Err(Rejection::PreconditionFailed);
        }
        if !allow_non_empty && (b.holds_under(name) || b.folders.has_children(name)) {
            return Err(Rejection::status(
                409,
                format!("The managed folder {name} is not empty."),
            ));
        }
        b.folders.remove(name);
        Ok(Reply::new(204))
    }

    /// `GET` or `PUT` of a managed folder's IAM policy.
    pub(super) fn folder_iam(
        &mut self,
        bucket: &str,
        name: &str,
        set: bool,
        data: &[u8],
    ) -> Result<Served, Rejection> {
        let body: Map<String, Value> = Self::json_body(data)?;
        let now_ms = self.now_ms;
        let b = self.existing(bucket)?;
        let policy = match set {
            true => b.folders.set_iam(name, &body, now_ms)?,
            false => b.folders.iam(name).ok_or_else(|| no_such_folder(name))?,
        };
        let mut answer = policy.json(bucket, &b.meta.project);
        answer["resourceId"] = json!(format!("projects/_/buckets/{bucket}/managedFolders/{name}"));
        if policy.bindings.is_none() {
            // A folder's policy grants nothing until set: the bucket's applies.
            answer["bindings"] = json!([]);
        }
        Ok(Reply::json(200, &answer).into())
    }
}
