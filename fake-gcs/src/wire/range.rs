//! The `Range` header of a download.

/// A parsed single-range `Range: bytes=...` request header, resolved against the
/// object size: the inclusive first and last byte. `None` means "not satisfiable".
pub fn resolve_range(value: &str, size: u64) -> Option<(u64, u64)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') || size == 0 {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().ok()?;
            (n > 0).then(|| (size.saturating_sub(n), size - 1))
        }
        (start, "") => {
            let start: u64 = start.parse().ok()?;
            (start < size).then_some((start, size - 1))
        }
        (start, end) => {
            let (start, end): (u64, u64) = (start.parse().ok()?, end.parse().ok()?);
            (start <= end && start < size).then(|| (start, end.min(size - 1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_against_the_object_size() {
        assert_eq!(resolve_range("bytes=0-3", 10), Some((0, 3)));
        assert_eq!(resolve_range("bytes=4-", 10), Some((4, 9)));
        assert_eq!(resolve_range("bytes=-3", 10), Some((7, 9)));
        assert_eq!(resolve_range("bytes=5-100", 10), Some((5, 9)));
        assert_eq!(resolve_range("bytes=10-", 10), None);
        assert_eq!(resolve_range("bytes=0-1,3-4", 10), None);
    }
}
