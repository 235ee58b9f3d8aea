//! A project's HMAC keys (`/storage/v1/projects/{project}/hmacKeys`) through the
//! JSON API: create, list, get, update (state, with an optional ETag), delete (an
//! inactive key). The service account is answered in `mod.rs`.

use serde_json::{Value, json};

use super::{Ctx, Served};
use crate::metadata::KeyFilter;
use crate::wire::{Rejection, Reply, Verb};

impl Ctx<'_> {
    /// Serves a [`crate::wire::MetaRoute::HmacKeys`] request.
    pub(super) fn hmac_keys(
        &mut self,
        project: &str,
        access_id: Option<&str>,
        verb: Verb,
        data: &[u8],
    ) -> Result<Served, Rejection> {
        let body = Self::json_body(data)?;
        let (base, now_ms) = (self.base.as_str(), self.now_ms);
        let keys = &mut self.state.hmac_keys;
        let id = access_id.unwrap_or("");
        let answer = match verb {
            Verb::Insert => {
                let Some(account) = self
                    .query
                    .get("serviceAccountEmail")
                    .filter(|a| !a.is_empty())
                else {
                    return Err(Rejection::invalid("Required: serviceAccountEmail."));
                };
                keys.create(base, project, account, now_ms)
            }
            Verb::List => {
                let filter = KeyFilter {
                    project,
                    service_account: self.query.get("serviceAccountEmail"),
                    show_deleted: self.query.get("showDeletedKeys") == Some("true"),
                };
                let max = match self.query.get("maxResults").map(str::parse::<usize>) {
                    None => 1000,
                    Some(Ok(n)) => n.clamp(1, 1000),
                    Some(Err(_)) => return Err(Rejection::invalid("Invalid maxResults.")),
                };
                let (items, next) = keys.list(base, &filter, self.query.get("pageToken"), max);
                let mut page = json!({ "kind": "storage#hmacKeysMetadata", "items": items });
                if let Some(next) = next {
                    page["nextPageToken"] = Value::String(next);
                }
                page
            }
            Verb::Get => keys.get(base, project, id)?,
            Verb::Update | Verb::Patch => keys.update(base, project, id, &body, now_ms)?,
            Verb::Delete => {
                keys.delete(project, id, now_ms)?;
                return Ok(Reply::new(204).into());
            }
        };
        Ok(Reply::json(200, &answer).into())
    }
}
