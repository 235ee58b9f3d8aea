//! Preconditions on an object's generation: `ifGenerationMatch` (query) or
//! `x-goog-if-generation-match` (header), and `ifGenerationNotMatch`. `0` means
//! "only if absent".

use http::HeaderMap;

use crate::wire::error::Rejection;
use crate::wire::route::{Query, header};

/// Conditions a request puts on the object's current generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `ifGenerationMatch` / `x-goog-if-generation-match`: 0 means "only if absent".
    pub if_generation_match: Option<i64>,
    /// `ifGenerationNotMatch`.
    pub if_generation_not_match: Option<i64>,
}

impl Preconditions {
    /// The preconditions of a request; 400 when one is not an integer.
    pub fn parse(query: &Query, headers: &HeaderMap) -> Result<Self, Rejection> {
        let parse = |name: &str, value: Option<&str>| -> Result<Option<i64>, Rejection> {
            value
                .map(|v| {
                    v.trim().parse::<i64>().map_err(|_| {
                        Rejection::invalid(format!(
                            "Invalid argument: {name}={v:?} is not an integer."
                        ))
                    })
                })
                .transpose()
        };
        let if_generation_match = parse(
            "ifGenerationMatch",
            query
                .get("ifGenerationMatch")
                .or_else(|| header(headers, "x-goog-if-generation-match")),
        )?;
        let if_generation_not_match =
            parse("ifGenerationNotMatch", query.get("ifGenerationNotMatch"))?;
        Ok(Preconditions {
            if_generation_match,
            if_generation_not_match,
        })
    }

    /// Whether the conditions hold for an object whose live generation is `current`.
    pub fn hold(&self, current: Option<i64>) -> bool {
        let live = current.unwrap_or(0);
        let matches = self.if_generation_match.is_none_or(|g| g == live);
        let not_matches = self.if_generation_not_match.is_none_or(|g| g != live);
        matches && not_matches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preconditions_follow_cloud_storage() {
        let absent = Preconditions {
            if_generation_match: Some(0),
            ..Default::default()
        };
        assert!(absent.hold(None));
        assert!(!absent.hold(Some(5)));
        let exact = Preconditions {
            if_generation_match: Some(5),
            ..Default::default()
        };
        assert!(exact.hold(Some(5)) && !exact.hold(Some(6)) && !exact.hold(None));
        let not = Preconditions {
            if_generation_not_match: Some(5),
            ..Default::default()
        };
        assert!(!not.hold(Some(5)) && not.hold(Some(6)) && not.hold(None));
        assert!(Preconditions::default().hold(None));
    }

    #[test]
    fn preconditions_come_from_the_query_or_the_header() {
        let mut headers = HeaderMap::new();
        headers.insert("x-goog-if-generation-match", "0".parse().unwrap());
        let from_header = Preconditions::parse(&Query::default(), &headers).unwrap();
        assert_eq!(from_header.if_generation_match, Some(0));
        let query = Query::parse(Some("ifGenerationMatch=7&ifGenerationNotMatch=3"));
        let from_query = Preconditions::parse(&query, &headers).unwrap();
        assert_eq!(from_query.if_generation_match, Some(7));
        assert_eq!(from_query.if_generation_not_match, Some(3));
        let bad = Query::parse(Some("ifGenerationMatch=x"));
        assert_eq!(
            Preconditions::parse(&bad, &HeaderMap::new()),
            Err(Rejection::invalid(
                "Invalid argument: ifGenerationMatch=\"x\" is not an integer."
            ))
        );
    }
}
