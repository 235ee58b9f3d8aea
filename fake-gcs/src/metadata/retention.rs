//! Object retention (Cloud Storage's object retention lock): what a bucket
//! created with `enableObjectRetention=true` shows (`objectRetention: {mode:
//! "Enabled"}`), an object's `retention` (`mode` `Unlocked` or `Locked`,
//! `retainUntilTime`) read and checked, and the rules for setting and changing
//! one. The bucket enforces it ([`crate::bucket::Bucket::protect_version`]:
//! no delete or overwrite before `retainUntilTime`).
//!
//! As the service documents: an object's retention may be set only in a bucket
//! with object retention enabled (400 otherwise); an `Unlocked` retention may be
//! lengthened or locked freely, and shortened or removed only with
//! `overrideUnlockedRetention=true` (403 without); a `Locked` one may only be
//! lengthened, whatever the request says (403).

use serde_json::{Map, Value, json};

use crate::wire::Rejection;

/// The bucket field object retention is shown in, and its value once enabled.
pub(crate) const BUCKET_FIELD: &str = "objectRetention";

/// The object field that holds an object's retention.
pub(crate) const OBJECT_FIELD: &str = "retention";

/// `objectRetention` of a bucket created with `enableObjectRetention=true`.
pub(crate) fn enabled() -> Value {
    json!({ "mode": "Enabled" })
}

/// An object's retention, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    locked: bool,
    /// `retainUntilTime`, in milliseconds since the Unix epoch.
    pub(crate) until_ms: u64,
}

impl Retention {
    /// The retention `fields` (an object's resource fields) hold, if any; 400
    /// when it is not one. One whose `mode` and `retainUntilTime` are both null
    /// or absent (what the Python client sends to remove it) is none.
    pub(crate) fn of(fields: &Map<String, Value>) -> Result<Option<Retention>, Rejection> {
        let given = |v: &Value, key| v.get(key).is_some_and(|f| !f.is_null());
        match fields.get(OBJECT_FIELD) {
            Some(v) if given(v, "mode") || given(v, "retainUntilTime") => Self::parse(v).map(Some),
            _ => Ok(None),
        }
    }

    fn parse(value: &Value) -> Result<Retention, Rejection> {
        let locked = match value.get("mode").and_then(Value::as_str) {
            Some("Locked") => true,
            Some("Unlocked") => false,
            _ => {
                return Err(Rejection::invalid(format!(
                    "Invalid retention mode in {value}."
                )));
            }
        };
        let until = value.get("retainUntilTime").and_then(Value::as_str);
        let until = until.and_then(|t| humantime::parse_rfc3339_weak(t).ok());
        let since = until.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        let Some(since) = since else {
            return Err(Rejection::invalid(format!(
                "Invalid retainUntilTime in {value}."
            )));
        };
        Ok(Retention {
            locked,
            until_ms: since.as_millis() as u64,
        })
    }
}

/// Whether an object of a bucket with object retention `enabled` may go from
/// retention `old` to `new` (`None`: none); `overridden` is
/// `overrideUnlockedRetention=true`.
pub(crate) fn check_change(
    enabled: bool,
    old: Option<Retention>,
    new: Option<Retention>,
    overridden: bool,
) -> Result<(), Rejection> {
    if new.is_some() && !enabled {
        return Err(Rejection::invalid(
            "Object retention is not enabled on this bucket: create it with \
             enableObjectRetention=true to set an object's retention.",
        ));
    }
    let Some(old) = old else { return Ok(()) };
    let lengthened = new.is_some_and(|n| n.until_ms >= old.until_ms);
    let stays_locked = new.is_some_and(|n| n.locked);
    if old.locked && !(lengthened && stays_locked) {
        return Err(Rejection::status(
            403,
            "The object's retention is Locked: its retainUntilTime can only be extended.",
        ));
    }
    if !old.locked && !lengthened && !overridden {
        return Err(Rejection::status(
            403,
            "Shortening or removing an Unlocked object retention requires \
             overrideUnlockedRetention=true.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(locked: bool, until_ms: u64) -> Option<Retention> {
        Some(Retention { locked, until_ms })
    }

    #[test]
    fn locked_retention_only_lengthens_and_unlocked_shortens_with_the_override() {
        assert!(check_change(false, None, r(false, 5), false).is_err());
        assert!(check_change(false, None, None, false).is_ok());
        assert!(check_change(true, None, r(true, 5), false).is_ok());
        assert!(check_change(true, r(false, 5), r(false, 9), false).is_ok());
        assert!(check_change(true, r(false, 5), r(false, 1), false).is_err());
        assert!(check_change(true, r(false, 5), r(false, 1), true).is_ok());
        assert!(check_change(true, r(false, 5), None, true).is_ok());
        assert!(check_change(true, r(false, 5), r(true, 5), false).is_ok());
        assert!(check_change(true, r(true, 5), r(true, 9), false).is_ok());
        assert!(check_change(true, r(true, 5), r(true, 1), true).is_err());
        assert!(check_change(true, r(true, 5), r(false, 9), true).is_err());
        assert!(check_change(true, r(true, 5), None, true).is_err());
        let parsed =
            json!({ "retention": { "mode": "Locked", "retainUntilTime": "1970-01-01T00:00:01Z" } });
        assert_eq!(
            Retention::of(parsed.as_object().unwrap()).unwrap(),
            r(true, 1000)
        );
        let removed = json!({ "retention": { "mode": null, "retainUntilTime": null } });
        assert_eq!(Retention::of(removed.as_object().unwrap()).unwrap(), None);
        let bad = json!({ "retention": { "mode": "Forever" } });
        assert!(Retention::of(bad.as_object().unwrap()).is_err());
    }
}
