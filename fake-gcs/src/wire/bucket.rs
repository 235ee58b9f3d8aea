//! A bucket as the JSON API describes it: its resource, the list of buckets, and
//! which of the resource's fields a client may set.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use crate::wire::encoding::{encode_component, rfc3339_millis};

/// Fields of the bucket resource the server keeps for itself: a client's insert,
/// patch or update does not set them (ACLs are changed apart, through their own
/// field handling).
pub const BUCKET_READ_ONLY_FIELDS: &[&str] = &[
    "kind",
    "id",
    "selfLink",
    "projectNumber",
    "name",
    "timeCreated",
    "updated",
    "metageneration",
    "etag",
    "owner",
    "acl",
    "defaultObjectAcl",
    "objectRetention",
];

/// The JSON API's bucket resource for bucket `name`, created at `created_unix_ms`,
/// with its link under `base`.
pub fn bucket_resource(base: &str, name: &str, created_unix_ms: u64) -> Value {
    bucket_resource_with(
        base,
        name,
        created_unix_ms,
        (1, created_unix_ms),
        &Map::new(),
    )
}

/// The bucket resource of a bucket that metadata calls changed: its
/// `(metageneration, updated_unix_ms)` and the `fields` set on it (labels,
/// storage class, retention policy, ...), over the defaults (a `STANDARD` bucket in
/// the `US` multi-region, `rpo` `DEFAULT`, as Cloud Storage makes one when the
/// insert names no location).
pub fn bucket_resource_with(
    base: &str,
    name: &str,
    created_unix_ms: u64,
    (metageneration, updated_unix_ms): (i64, u64),
    fields: &Map<String, Value>,
) -> Value {
    let mut resource = json!({
        "kind": "storage#bucket",
        "id": name,
        "selfLink": format!("{base}/storage/v1/b/{}", encode_component(name)),
        "projectNumber": "0",
        "name": name,
        "timeCreated": rfc3339_millis(created_unix_ms),
        "updated": rfc3339_millis(updated_unix_ms),
        "metageneration": metageneration.to_string(),
        "location": "US",
        "locationType": "multi-region",
        "rpo": "DEFAULT",
        "storageClass": "STANDARD",
        "etag": bucket_etag(metageneration),
    });
    if let Value::Object(resource) = &mut resource {
        for (key, value) in fields {
            resource.insert(key.clone(), value.clone());
        }
    }
    resource
}

/// Cloud Storage's multi-regions.
const MULTI_REGIONS: &[&str] = &["US", "EU", "ASIA"];

/// Cloud Storage's predefined dual-regions.
const DUAL_REGIONS: &[&str] = &["ASIA1", "EUR4", "EUR5", "EUR7", "EUR8", "NAM4"];

/// The `locationType` Cloud Storage gives a bucket in `location` (upper case):
/// `dual-region` for a custom placement (`custom_placement`) or a predefined
/// dual-region, `multi-region` for `US`, `EU` and `ASIA`, `region` otherwise.
pub fn location_type(location: &str, custom_placement: bool) -> &'static str {
    if custom_placement || DUAL_REGIONS.contains(&location) {
        "dual-region"
    } else if MULTI_REGIONS.contains(&location) {
        "multi-region"
    } else {
        "region"
    }
}

/// A bucket's ETag, as Cloud Storage forms it: base64 of a protocol buffer holding
/// the metageneration (`CAE=` for 1).
pub fn bucket_etag(metageneration: i64) -> String {
    let mut message = vec![0x08];
    let mut value = metageneration as u64;
    while value >= 0x80 {
        message.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    message.push(value as u8);
    B64.encode(message)
}

/// The JSON API's answer to listing buckets.
pub fn bucket_list(resources: Vec<Value>) -> Value {
    json!({ "kind": "storage#buckets", "items": resources })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_bucket_shows_its_fields_over_the_defaults() {
        let plain = bucket_resource("http://h", "bkt", 0);
        assert_eq!(plain["etag"], "CAE=");
        assert_eq!(plain["metageneration"], "1");
        let fields: Map<String, Value> = [
            ("storageClass".to_string(), json!("NEARLINE")),
            ("labels".to_string(), json!({ "k": "v" })),
        ]
        .into_iter()
        .collect();
        let changed = bucket_resource_with("http://h", "bkt", 0, (3, 60_000), &fields);
        assert_eq!(changed["storageClass"], "NEARLINE");
        assert_eq!(changed["labels"]["k"], "v");
        assert_eq!(changed["metageneration"], "3");
        assert_eq!(changed["etag"], bucket_etag(3));
        assert_eq!(changed["updated"], "1970-01-01T00:01:00.000Z");
        assert_eq!(bucket_etag(300), B64.encode([0x08, 0xac, 0x02]));
    }
}
