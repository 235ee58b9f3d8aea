//! The times Cloud Storage stamps on a bucket's configurations when a client
//! changes them: autoclass's `toggleTime` (when `enabled` last changed),
//! `terminalStorageClass` (`NEARLINE` unless given, while enabled) and
//! `terminalStorageClassUpdateTime`; the soft delete policy's `effectiveTime`
//! (when `retentionDurationSeconds` last changed); each encryption enforcement
//! config's `effectiveTime` (when its `restrictionMode` last changed). An insert,
//! patch or update that leaves a value as it was keeps its time; whatever time a
//! client sends is replaced.

use serde_json::{Map, Value, json};

use crate::wire::rfc3339_millis;

/// The encryption enforcement configs, under `encryption`.
const ENFORCEMENT: [&str; 3] = [
    "googleManagedEncryptionEnforcementConfig",
    "customerManagedEncryptionEnforcementConfig",
    "customerSuppliedEncryptionEnforcementConfig",
];

/// Stamps the times of the configurations in `after` (a bucket's fields once a
/// change is applied) that differ from `before`'s, at `now_ms`.
pub(crate) fn stamp(before: &Map<String, Value>, after: &mut Map<String, Value>, now_ms: u64) {
    let now = json!(rfc3339_millis(now_ms));
    if let Some(Value::Object(autoclass)) = after.get_mut("autoclass") {
        let old = before.get("autoclass");
        follow(old, autoclass, ("enabled", "toggleTime"), &now);
        if autoclass.get("enabled") == Some(&Value::Bool(true)) {
            let terminal = autoclass.entry("terminalStorageClass");
            terminal.or_insert_with(|| json!("NEARLINE"));
            let keys = ("terminalStorageClass", "terminalStorageClassUpdateTime");
            follow(old, autoclass, keys, &now);
        }
    }
    if let Some(Value::Object(policy)) = after.get_mut("softDeletePolicy") {
        let old = before.get("softDeletePolicy");
        follow(
            old,
            policy,
            ("retentionDurationSeconds", "effectiveTime"),
            &now,
        );
    }
    let old_encryption = before.get("encryption");
    if let Some(Value::Object(encryption)) = after.get_mut("encryption") {
        for name in ENFORCEMENT {
            if let Some(Value::Object(config)) = encryption.get_mut(name) {
                let old = old_encryption.and_then(|e| e.get(name));
                follow(old, config, ("restrictionMode", "effectiveTime"), &now);
            }
        }
    }
}

/// Sets `config`'s `time` to `now` when its `key` differs from `before`'s, and
/// to `before`'s time when it does not.
fn follow(
    before: Option<&Value>,
    config: &mut Map<String, Value>,
    keys: (&str, &str),
    now: &Value,
) {
    let (key, time) = keys;
    let kept = before
        .filter(|b| b.get(key) == config.get(key))
        .and_then(|b| b.get(time));
    config.insert(time.into(), kept.unwrap_or(now).clone());
}
