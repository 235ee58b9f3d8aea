//! Object names the spool accepts: Cloud Storage's rules, checked before a byte is
//! written, so that an entry can never be spooled under a name the store will refuse.
//!
//! The rules (<https://cloud.google.com/storage/docs/objects#naming>): 1 to 1024 bytes
//! of UTF-8; no carriage return or line feed; not `.` or `..`; not starting with
//! `.well-known/acme-challenge/`. The name is stored inside the entry, never used as a
//! file name, so no other character needs escaping.

/// The longest object name Cloud Storage accepts, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 1024;

/// Why an object name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidName {
    /// The name is empty.
    #[error("object name is empty")]
    Empty,
    /// The name is longer than [`MAX_NAME_BYTES`].
    #[error("object name is {len} bytes of UTF-8; Cloud Storage allows at most {MAX_NAME_BYTES}")]
    TooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// The name contains a carriage return or a line feed.
    #[error("object name {name:?} contains a carriage return or line feed")]
    LineBreak {
        /// The refused name.
        name: String,
    },
    /// The name is `.` or `..`, or starts with the ACME challenge prefix.
    #[error("object name {name:?} is reserved by Cloud Storage")]
    Reserved {
        /// The refused name.
        name: String,
    },
    /// The object store client cannot express this name exactly (for `object_store`:
    /// empty segments, leading or trailing `/`, control characters, `.`/`..` segments).
    #[error("object name {name:?} cannot be written through this object store client: {reason}")]
    Unrepresentable {
        /// The refused name.
        name: String,
        /// What the client objected to.
        reason: String,
    },
}

/// The key of the object name `name` in an entry's file name and the spool's index:
/// 64-bit FNV-1a of its bytes, the same on every platform and in every version, so
/// that open learns which entries share a name from the listing alone. Two names
/// with one key only cost order: their entries drain one at a time, oldest first,
/// as one name's do.
///
/// ```
/// assert_eq!(spool::name::key(""), 0xcbf2_9ce4_8422_2325);
/// assert_ne!(spool::name::key("a"), spool::name::key("b"));
/// ```
pub fn key(name: &str) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    name.bytes().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// Checks `name` against Cloud Storage's naming rules.
///
/// ```
/// use spool::name::{check, InvalidName};
/// assert!(check("logs/2026-10-08/a.json").is_ok());
/// assert_eq!(check(""), Err(InvalidName::Empty));
/// assert!(matches!(check("a\nb"), Err(InvalidName::LineBreak { .. })));
/// ```
pub fn check(name: &str) -> Result<(), InvalidName> {
    if name.is_empty() {
        return Err(InvalidName::Empty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(InvalidName::TooLong { len: name.len() });
    }
    if name.contains(['\r', '\n']) {
        return Err(InvalidName::LineBreak { name: name.into() });
    }
    if name == "." || name == ".." || name.starts_with(".well-known/acme-challenge/") {
        return Err(InvalidName::Reserved { name: name.into() });
    }
    Ok(())
}

/// Checks `name` against Cloud Storage's naming rules and against what the
/// `object_store` client can write exactly, and returns the store path that writes
/// it. The one rule for every entry point (a put, a staged entry, the uploader, the
/// drain): a name that passes is a name the drain can deliver.
///
/// `object_store`'s [`Path::parse`](object_store::path::Path::parse) refuses empty
/// segments, a leading or trailing `/`, `.` and `..` segments and control
/// characters; Cloud Storage would take such names, but this client would write
/// another name or none.
///
/// ```
/// use spool::name::{check_writable, InvalidName};
/// assert_eq!(check_writable("a/b c").unwrap().as_ref(), "a/b c");
/// assert!(matches!(check_writable("a//b"), Err(InvalidName::Unrepresentable { .. })));
/// ```
pub fn check_writable(name: &str) -> Result<object_store::path::Path, InvalidName> {
    check(name)?;
    let path = object_store::path::Path::parse(name).map_err(|e| InvalidName::Unrepresentable {
        name: name.into(),
        reason: e.to_string(),
    })?;
    if path.as_ref() != name {
        return Err(InvalidName::Unrepresentable {
            name: name.into(),
            reason: format!("the client would write it as {:?}", path.as_ref()),
        });
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names_up_to_the_limit() {
        assert_eq!(check("a"), Ok(()));
        assert_eq!(check("dir/sub dir/ünï.bin"), Ok(()));
        assert_eq!(check(&"x".repeat(MAX_NAME_BYTES)), Ok(()));
    }

    #[test]
    fn refuses_what_cloud_storage_refuses() {
        assert_eq!(check(""), Err(InvalidName::Empty));
        assert_eq!(
            check(&"x".repeat(MAX_NAME_BYTES + 1)),
            Err(InvalidName::TooLong { len: 1025 })
        );
        // Multi-byte characters count in bytes, not characters.
        assert_eq!(
            check(&"é".repeat(513)),
            Err(InvalidName::TooLong { len: 1026 })
        );
        assert!(matches!(check("a\rb"), Err(InvalidName::LineBreak { .. })));
        assert!(matches!(check("."), Err(InvalidName::Reserved { .. })));
        assert!(matches!(check(".."), Err(InvalidName::Reserved { .. })));
        assert!(matches!(
            check(".well-known/acme-challenge/x"),
            Err(InvalidName::Reserved { .. })
        ));
    }
}
