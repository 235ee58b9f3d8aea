//! Preconditions on an object's generation: `ifGenerationMatch` (query) or
//! `x-goog-if-generation-match` (header), and `ifGenerationNotMatch`. `0` means
//! "only if absent". [`Conditions`] adds the metageneration's
//! (`ifMetagenerationMatch`, `ifMetagenerationNotMatch`), and reads a copy's
//! conditions on its source (`ifSourceGenerationMatch`, ...) as well.

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

/// The four conditions of the JSON API's metadata calls, on a generation and a
/// metageneration: `ifGenerationMatch`, `ifGenerationNotMatch`,
/// `ifMetagenerationMatch`, `ifMetagenerationNotMatch` (or, for a copy's source,
/// the same names with `Source` after `if`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conditions {
    /// `ifGenerationMatch`: 0 means "only if absent".
    pub if_generation_match: Option<i64>,
    /// `ifGenerationNotMatch`.
    pub if_generation_not_match: Option<i64>,
    /// `ifMetagenerationMatch`.
    pub if_metageneration_match: Option<i64>,
    /// `ifMetagenerationNotMatch`.
    pub if_metageneration_not_match: Option<i64>,
}

impl Conditions {
    /// The conditions of `query` named `{prefix}GenerationMatch` and so on
    /// (`prefix` is `if` or `ifSource`); 400 naming the parameter when one is not
    /// an integer.
    pub fn parse(query: &Query, prefix: &str) -> Result<Self, Rejection> {
        let parse = |suffix: &str| -> Result<Option<i64>, Rejection> {
            let name = format!("{prefix}{suffix}");
            query
                .get(&name)
                .map(|v| {
                    v.trim().parse::<i64>().map_err(|_| {
                        Rejection::invalid(format!(
                            "Invalid argument: {name}={v:?} is not an integer."
                        ))
                    })
                })
                .transpose()
        };
        Ok(Conditions {
            if_generation_match: parse("GenerationMatch")?,
            if_generation_not_match: parse("GenerationNotMatch")?,
            if_metageneration_match: parse("MetagenerationMatch")?,
            if_metageneration_not_match: parse("MetagenerationNotMatch")?,
        })
    }

    /// Whether they hold for a resource whose live generation and metageneration
    /// are `live` (`None`: absent, which only `ifGenerationMatch=0` and the
    /// not-match conditions accept).
    pub fn hold(&self, live: Option<(i64, i64)>) -> bool {
        let generation = live.map_or(0, |(g, _)| g);
        let generation_ok = self.if_generation_match.is_none_or(|g| g == generation)
            && self.if_generation_not_match.is_none_or(|g| g != generation);
        let metageneration_ok = match live {
            Some((_, m)) => {
                self.if_metageneration_match.is_none_or(|c| c == m)
                    && self.if_metageneration_not_match.is_none_or(|c| c != m)
            }
            None => self.if_metageneration_match.is_none(),
        };
        generation_ok && metageneration_ok
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
    fn metageneration_and_source_conditions_are_read_by_prefix() {
        let query = Query::parse(Some(
            "ifMetagenerationMatch=2&ifSourceGenerationMatch=7&ifGenerationMatch=0",
        ));
        let destination = Conditions::parse(&query, "if").unwrap();
        assert_eq!(destination.if_metageneration_match, Some(2));
        assert!(
            !destination.hold(None),
            "a metageneration condition needs an object"
        );
        assert!(
            !destination.hold(Some((5, 2))),
            "ifGenerationMatch=0: only if absent"
        );
        let source = Conditions::parse(&query, "ifSource").unwrap();
        assert!(source.hold(Some((7, 1))) && !source.hold(Some((8, 1))));
        let bad = Query::parse(Some("ifSourceMetagenerationNotMatch=x"));
        assert!(Conditions::parse(&bad, "ifSource").is_err());
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
