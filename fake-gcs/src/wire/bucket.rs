//! A bucket as the JSON API describes it.

use serde_json::{Value, json};

use crate::wire::encoding::{encode_component, rfc3339_millis};

/// The JSON API's bucket resource for bucket `name`, created at `created_unix_ms`,
/// with its link under `base`.
pub fn bucket_resource(base: &str, name: &str, created_unix_ms: u64) -> Value {
    let created = rfc3339_millis(created_unix_ms);
    json!({
        "kind": "storage#bucket",
        "id": name,
        "selfLink": format!("{base}/storage/v1/b/{}", encode_component(name)),
        "projectNumber": "0",
        "name": name,
        "timeCreated": created,
        "updated": created,
        "metageneration": "1",
        "location": "US-CENTRAL1",
        "locationType": "region",
        "storageClass": "STANDARD",
        "etag": "CAE=",
    })
}

/// The JSON API's answer to listing buckets.
pub fn bucket_list(resources: Vec<Value>) -> Value {
    json!({ "kind": "storage#buckets", "items": resources })
}
