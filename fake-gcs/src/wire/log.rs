//! What a server's request log line may say of a request and its answer: the query
//! with its secrets redacted, and a refusal's message.

use crate::wire::reply::Reply;

/// Query parameters whose values are secrets: API keys, OAuth tokens, resumable
/// session IDs (a session's only secret), signed URLs' signatures.
const SECRET_PARAMETERS: [&str; 7] = [
    "key",
    "access_token",
    "upload_id",
    "uploadid",
    "x-goog-signature",
    "x-goog-credential",
    "token",
];

/// The most of a refusal's message a log line carries.
const MAX_MESSAGE_CHARS: usize = 300;

/// `raw` (a query string as sent) with the value of every secret parameter
/// replaced by `REDACTED`.
pub fn redacted_query(raw: &str) -> String {
    if raw.is_empty() {
        return String::new();
    }
    raw.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if SECRET_PARAMETERS.contains(&name.to_ascii_lowercase().as_str()) => {
                format!("{name}=REDACTED")
            }
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The message of a refusal (an answer of 400 or more), from its JSON (`message`)
/// or XML (`<Message>`) error body, at most 300 characters; `None` for other
/// answers.
pub fn refusal_message(reply: &Reply) -> Option<String> {
    if reply.status < 400 {
        return None;
    }
    let text = String::from_utf8_lossy(&reply.body);
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| Some(v.get("error")?.get("message")?.as_str()?.to_string()))
        .or_else(|| {
            let start = text.find("<Message>")? + "<Message>".len();
            let end = text[start..].find("</Message>")? + start;
            Some(text[start..end].to_string())
        })
        .unwrap_or_else(|| text.into_owned());
    Some(message.chars().take(MAX_MESSAGE_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Api, error_reply};

    #[test]
    fn secrets_in_a_query_are_redacted_and_the_rest_kept() {
        let raw = "uploadType=resumable&upload_id=abc&name=a%2Fb&key=K&Access_Token=T";
        assert_eq!(
            redacted_query(raw),
            "uploadType=resumable&upload_id=REDACTED&name=a%2Fb&key=REDACTED&Access_Token=REDACTED"
        );
        assert_eq!(redacted_query(""), "");
    }

    #[test]
    fn a_refusal_message_comes_from_either_api_error_body() {
        let json = error_reply(Api::Json, 400, Some("bad name"));
        assert_eq!(refusal_message(&json).as_deref(), Some("bad name"));
        let xml = error_reply(Api::Xml, 412, Some("taken"));
        assert_eq!(refusal_message(&xml).as_deref(), Some("taken"));
        assert_eq!(refusal_message(&Reply::new(200)), None);
    }
}
