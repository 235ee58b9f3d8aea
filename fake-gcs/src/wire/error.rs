//! Error answers as Cloud Storage gives them: the JSON API's error body, the XML
//! API's, the wording of each status, and [`Rejection`], the typed reason a request
//! is refused, which becomes the body of whichever API the request came by.

use crate::wire::digest::Mismatch;
use crate::wire::encoding::xml_escape;
use crate::wire::reply::Reply;
use crate::wire::route::Api;

/// Why a request is refused, before it becomes a [`Reply`] in the request's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// `status`, with `message` or Cloud Storage's wording for the status.
    Status {
        /// The HTTP status.
        status: u16,
        /// The message; Cloud Storage's default for the status when `None`.
        message: Option<String>,
    },
    /// 404: the bucket does not exist.
    NoSuchBucket(String),
    /// 404: the object does not exist (or not in the generation asked for).
    NoSuchObject {
        /// The bucket.
        bucket: String,
        /// The object.
        name: String,
    },
    /// 412: `ifGenerationMatch` and the like did not hold.
    PreconditionFailed,
    /// 400: a declared digest differs from the bytes received.
    BadDigest(Mismatch),
}

impl Rejection {
    /// 400 with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::status(400, message)
    }

    /// `status` with `message`.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        Rejection::Status {
            status,
            message: Some(message.into()),
        }
    }

    /// Its HTTP status.
    pub fn http_status(&self) -> u16 {
        match self {
            Rejection::Status { status, .. } => *status,
            Rejection::NoSuchBucket(_) | Rejection::NoSuchObject { .. } => 404,
            Rejection::PreconditionFailed => 412,
            Rejection::BadDigest(_) => 400,
        }
    }

    /// The answer in `api`'s shape.
    pub fn reply(&self, api: Api) -> Reply {
        match self {
            Rejection::Status { status, message } => error_reply(api, *status, message.as_deref()),
            Rejection::NoSuchBucket(bucket) => no_such_bucket(api, bucket),
            Rejection::NoSuchObject { bucket, name } => no_such_object(api, bucket, name),
            Rejection::PreconditionFailed => precondition_failed(api),
            Rejection::BadDigest(mismatch) => bad_digest(api, mismatch),
        }
    }
}

/// `status` with Cloud Storage's body in `api`'s shape: `message`, or the status's
/// usual wording.
pub fn error_reply(api: Api, status: u16, message: Option<&str>) -> Reply {
    let (reason, code, default) = status_wording(status);
    let message = message.unwrap_or(default);
    match api {
        Api::Json => Reply::new(status)
            .header("content-type", "application/json; charset=UTF-8")
            .body(json_error_body(status, reason, message)),
        Api::Xml => Reply::xml(status, xml_error_body(code, message, None)),
    }
}

fn no_such_bucket(api: Api, bucket: &str) -> Reply {
    match api {
        Api::Json => error_reply(api, 404, Some("The specified bucket does not exist.")),
        Api::Xml => Reply::xml(
            404,
            xml_error_body(
                "NoSuchBucket",
                "The specified bucket does not exist.",
                Some(&format!("No such bucket: {bucket}")),
            ),
        ),
    }
}

fn no_such_object(api: Api, bucket: &str, name: &str) -> Reply {
    let details = format!("No such object: {bucket}/{name}");
    match api {
        Api::Json => error_reply(api, 404, Some(&details)),
        Api::Xml => Reply::xml(
            404,
            xml_error_body(
                "NoSuchKey",
                "The specified key does not exist.",
                Some(&details),
            ),
        ),
    }
}

fn precondition_failed(api: Api) -> Reply {
    let message = "At least one of the pre-conditions you specified did not hold.";
    match api {
        Api::Json => Reply::new(412)
            .header("content-type", "application/json; charset=UTF-8")
            .body(
                serde_json::json!({
                    "error": {
                        "code": 412,
                        "message": message,
                        "errors": [{
                            "message": message,
                            "domain": "global",
                            "reason": "conditionNotMet",
                            "locationType": "header",
                            "location": "If-Match",
                        }],
                    }
                })
                .to_string(),
            ),
        Api::Xml => Reply::xml(
            412,
            xml_error_body(
                "PreconditionFailed",
                message,
                Some("Preconditions failed on the object's generation."),
            ),
        ),
    }
}

fn bad_digest(api: Api, m: &Mismatch) -> Reply {
    let Mismatch {
        algorithm,
        declared,
        computed,
    } = m;
    match api {
        Api::Json => error_reply(
            api,
            400,
            Some(&format!(
                "Provided {algorithm} \"{declared}\" doesn't match calculated {algorithm} \"{computed}\"."
            )),
        ),
        Api::Xml => Reply::xml(
            400,
            xml_error_body(
                "BadDigest",
                &format!("The {algorithm} you specified did not match what we computed."),
                Some(&format!("declared {declared}, computed {computed}")),
            ),
        ),
    }
}

/// The JSON API's error body:
/// `{"error":{"code":412,"message":..,"errors":[{"message":..,"domain":"global","reason":..}]}}`.
pub fn json_error_body(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "error": {
            "code": code,
            "message": message,
            "errors": [{ "message": message, "domain": "global", "reason": reason }],
        }
    })
    .to_string()
}

/// The XML API's error body: `<?xml ...?><Error><Code>..</Code><Message>..</Message></Error>`.
pub fn xml_error_body(code: &str, message: &str, details: Option<&str>) -> String {
    let details = details
        .map(|d| format!("<Details>{}</Details>", xml_escape(d)))
        .unwrap_or_default();
    format!(
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{}</Code><Message>{}</Message>{details}</Error>",
        xml_escape(code),
        xml_escape(message)
    )
}

/// Cloud Storage's wording for an error status: (JSON reason, XML code, message).
pub fn status_wording(status: u16) -> (&'static str, &'static str, &'static str) {
    match status {
        400 => ("invalid", "InvalidArgument", "Invalid argument."),
        401 => (
            "required",
            "AuthenticationRequired",
            "Authentication required.",
        ),
        403 => ("forbidden", "AccessDenied", "Access denied."),
        404 => ("notFound", "NoSuchKey", "The specified key does not exist."),
        408 => ("requestTimeout", "RequestTimeout", "Request Timeout"),
        409 => ("conflict", "Conflict", "Conflict."),
        412 => (
            "conditionNotMet",
            "PreconditionFailed",
            "At least one of the pre-conditions you specified did not hold.",
        ),
        413 => ("uploadTooLarge", "EntityTooLarge", "Upload too large."),
        429 => (
            "rateLimitExceeded",
            "SlowDown",
            "The rate of change requests to the object is too high. Please slow down.",
        ),
        500 => (
            "backendError",
            "InternalError",
            "We encountered an internal error. Please try again.",
        ),
        501 => ("notImplemented", "NotImplemented", "Not implemented."),
        502 => (
            "backendError",
            "BadGateway",
            "Bad gateway. Please try again.",
        ),
        503 => (
            "backendError",
            "ServiceUnavailable",
            "We encountered an internal error. Please try again.",
        ),
        504 => (
            "backendError",
            "GatewayTimeout",
            "Gateway timeout. Please try again.",
        ),
        _ => ("error", "Error", "Error."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_answers_in_the_api_it_came_by() {
        let json = Rejection::PreconditionFailed.reply(Api::Json);
        assert_eq!(json.status, 412);
        assert!(
            std::str::from_utf8(&json.body)
                .unwrap()
                .contains("conditionNotMet")
        );
        let xml = Rejection::NoSuchBucket("b".into()).reply(Api::Xml);
        assert_eq!(
            std::str::from_utf8(&xml.body).unwrap(),
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist.</Message><Details>No such bucket: b</Details></Error>"
        );
        let default = Rejection::Status {
            status: 503,
            message: None,
        };
        assert!(
            std::str::from_utf8(&default.reply(Api::Json).body)
                .unwrap()
                .contains("\"reason\":\"backendError\"")
        );
    }
}
