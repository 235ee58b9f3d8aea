//! Compose: `POST /storage/v1/b/{bucket}/o/{destination}/compose` with a body
//! `{"sourceObjects": [{"name": ...}, ...], "destination": {...}}`, parsed into a
//! [`Compose`]: the destination object, its content type and attributes (from the
//! `destination` resource), its preconditions (`ifGenerationMatch`, ...) and the
//! source objects in order, each with an optional generation and
//! `objectPreconditions.ifGenerationMatch`. Finding the sources' bytes and storing
//! their concatenation is the server's.

use std::borrow::Cow;

use serde_json::Value;

use crate::wire::attributes::ObjectAttributes;
use crate::wire::error::Rejection;
use crate::wire::precondition::Preconditions;
use crate::wire::upload::{RequestHead, content_type};

/// Most source objects one compose request may name, as Cloud Storage allows.
pub const MAX_COMPOSE_SOURCES: usize = 32;

/// Most non-composite components a composite object may be made of, as Cloud
/// Storage allows.
pub const MAX_COMPONENTS: u32 = 1024;

/// One source object of a compose request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeSource {
    /// The object's name, in the destination's bucket.
    pub name: String,
    /// The generation to use; the live one when `None`.
    pub generation: Option<i64>,
    /// `objectPreconditions.ifGenerationMatch`: the live generation must be this.
    pub if_generation_match: Option<i64>,
}

/// A compose request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compose {
    /// The bucket of the sources and the destination.
    pub bucket: String,
    /// The destination object's name.
    pub destination: String,
    /// The sources, in the order their bytes are concatenated.
    pub sources: Vec<ComposeSource>,
    /// The destination resource's `contentType`, or empty when it gives none: the
    /// composite object has no content type, as in Cloud Storage.
    pub content_type: Cow<'static, str>,
    /// The destination resource's other attributes.
    pub attributes: ObjectAttributes,
    /// Conditions on the destination's current generation.
    pub preconditions: Preconditions,
}

impl Compose {
    /// The compose request of `body` to `bucket/destination`; 400 naming the field
    /// when the body is not a compose request or names more than
    /// [`MAX_COMPOSE_SOURCES`] sources.
    pub fn parse(
        bucket: &str,
        destination: &str,
        head: RequestHead<'_>,
        body: &[u8],
    ) -> Result<Compose, Rejection> {
        let preconditions = Preconditions::parse(head.query, head.headers)?;
        let request: Value = serde_json::from_slice(body)
            .map_err(|e| Rejection::invalid(format!("the compose request is not JSON: {e}")))?;
        let Some(Value::Array(sources)) = request.get("sourceObjects") else {
            return Err(Rejection::invalid(
                "Required: the compose request needs a sourceObjects array.",
            ));
        };
        if sources.is_empty() || sources.len() > MAX_COMPOSE_SOURCES {
            return Err(Rejection::invalid(format!(
                "The number of source objects provided ({}) must be between 1 and \
                 {MAX_COMPOSE_SOURCES}.",
                sources.len()
            )));
        }
        let sources = sources
            .iter()
            .enumerate()
            .map(|(i, source)| ComposeSource::parse(i, source))
            .collect::<Result<_, _>>()?;
        let resource = request.get("destination").unwrap_or(&Value::Null);
        let given_type = resource.get("contentType").and_then(Value::as_str);
        Ok(Compose {
            bucket: bucket.to_string(),
            destination: destination.to_string(),
            sources,
            content_type: given_type.map_or(Cow::Borrowed(""), |t| content_type(Some(t))),
            attributes: ObjectAttributes::from_resource(resource),
            preconditions,
        })
    }
}

impl ComposeSource {
    /// `sourceObjects[i]`.
    fn parse(i: usize, source: &Value) -> Result<ComposeSource, Rejection> {
        let field = |name: &str| format!("sourceObjects[{i}].{name}");
        let name = match source.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => return Err(Rejection::invalid(format!("Required: {}.", field("name")))),
        };
        let generation = int64(source.get("generation"), || field("generation"))?;
        let if_generation_match = int64(
            source
                .get("objectPreconditions")
                .and_then(|p| p.get("ifGenerationMatch")),
            || field("objectPreconditions.ifGenerationMatch"),
        )?;
        Ok(ComposeSource {
            name,
            generation,
            if_generation_match,
        })
    }
}

/// An int64 as the JSON API writes it (a string) or as a number.
fn int64(value: Option<&Value>, field: impl Fn() -> String) -> Result<Option<i64>, Rejection> {
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.parse().ok(),
        Some(Value::Number(n)) => n.as_i64(),
        Some(_) => None,
    };
    match parsed {
        Some(n) => Ok(Some(n)),
        None => Err(Rejection::invalid(format!(
            "Invalid argument: {} is not an integer.",
            field()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;
    use crate::wire::route::Query;

    fn parse(query: &str, body: &str) -> Result<Compose, Rejection> {
        let (query, headers) = (Query::parse(Some(query)), HeaderMap::new());
        let head = RequestHead {
            query: &query,
            headers: &headers,
        };
        Compose::parse("b", "d", head, body.as_bytes())
    }

    #[test]
    fn a_compose_request_names_its_sources_destination_and_preconditions() {
        let compose = parse(
            "ifGenerationMatch=0",
            r#"{"sourceObjects":[{"name":"a"},{"name":"b","generation":"7","objectPreconditions":{"ifGenerationMatch":7}}],
                "destination":{"contentType":"text/plain","cacheControl":"no-store","metadata":{"k":"v"}}}"#,
        )
        .unwrap();
        assert_eq!(compose.destination, "d");
        assert_eq!(compose.preconditions.if_generation_match, Some(0));
        assert_eq!(
            compose.sources[1],
            ComposeSource {
                name: "b".into(),
                generation: Some(7),
                if_generation_match: Some(7)
            }
        );
        assert_eq!(compose.content_type, "text/plain");
        assert_eq!(
            compose.attributes.cache_control.as_deref(),
            Some("no-store")
        );
        assert_eq!(compose.attributes.metadata["k"], "v");
        let bare = parse("", r#"{"sourceObjects":[{"name":"a"}]}"#).unwrap();
        assert_eq!(bare.content_type, "");
    }

    #[test]
    fn a_bad_compose_request_is_refused_naming_the_problem() {
        let message = |query: &str, body: &str| match parse(query, body) {
            Err(Rejection::Status {
                status: 400,
                message: Some(m),
            }) => m,
            other => panic!("{body}: {other:?}"),
        };
        assert!(message("", "[").contains("not JSON"));
        assert!(message("", "{}").contains("sourceObjects"));
        assert!(message("", r#"{"sourceObjects":[]}"#).contains("(0)"));
        let many = format!(
            r#"{{"sourceObjects":[{}]}}"#,
            vec![r#"{"name":"a"}"#; 33].join(",")
        );
        assert!(message("", &many).contains("(33) must be between 1 and 32"));
        assert!(
            message("", r#"{"sourceObjects":[{"name":"a"},{}]}"#).contains("sourceObjects[1].name")
        );
        assert!(
            message("", r#"{"sourceObjects":[{"name":"a","generation":"x"}]}"#)
                .contains("sourceObjects[0].generation")
        );
        assert!(
            message("ifGenerationMatch=x", r#"{"sourceObjects":[{"name":"a"}]}"#)
                .contains("ifGenerationMatch")
        );
    }
}
