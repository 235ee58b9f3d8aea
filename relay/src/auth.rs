//! Who may send the relay requests: [`Access`], checked on every request before the
//! handler runs (`server.rs`), and the bearer [`Token`] it may require. The threat
//! model is in `docs/relay.md` ("Who can write through the relay").
//!
//! In order, a request is refused:
//!
//! | what | status | why |
//! |---|---|---|
//! | it carries an `Origin`, `Sec-Fetch-*` or `Referer` header | 403, whatever its token | only browsers send them; a web page on the host could otherwise POST a `text/plain` media upload as a CORS "simple request", which needs no preflight, or read an object with a `<script src>` (which carries no `Origin`) |
//! | the relay listens on loopback and `Host` is not a loopback name (`localhost`, `127.x.x.x`, `[::1]`, with any port) | 403 | DNS rebinding: a page whose name resolves to 127.0.0.1 reaches the relay under its own name |
//! | a token is configured and `Authorization` is not `Bearer TOKEN` | 401 with `WWW-Authenticate: Bearer` | only holders of the token may write |
//!
//! The token is compared in constant time (in its length: the time depends on the
//! longer of the two, never on where they differ). Refusals close the connection
//! and say what to do; they never echo the token.

use std::fmt;
use std::sync::Arc;

use fake_gcs::wire::{Api, Reply, error_reply, header};
use http::HeaderMap;

/// The least length of a token, in bytes: about 96 bits of a random hex or base64
/// string. `openssl rand -hex 32` gives 64.
pub const MIN_TOKEN_BYTES: usize = 24;

/// The environment variable the `spool-relay` command reads a token from.
pub const TOKEN_ENV: &str = "SPOOL_RELAY_TOKEN";

/// The environment variable the `spool-relay` command reads the metrics token from.
pub const METRICS_TOKEN_ENV: &str = "SPOOL_RELAY_METRICS_TOKEN";

/// A bearer token requests must carry. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Arc<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({} bytes, not shown)", self.0.len())
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// Shorter than [`MIN_TOKEN_BYTES`].
    TooShort(usize),
    /// A byte an HTTP header value cannot carry as is: only printable ASCII without
    /// spaces (a token68, as `Bearer` needs).
    NotPrintable,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::TooShort(len) => write!(
                f,
                "the token has {len} bytes; use at least {MIN_TOKEN_BYTES} random ones (for \
                 example the output of `openssl rand -hex 32`)"
            ),
            TokenError::NotPrintable => write!(
                f,
                "the token holds a byte an Authorization header cannot carry: use printable \
                 ASCII without spaces (hex or base64)"
            ),
        }
    }
}

impl std::error::Error for TokenError {}

impl Token {
    /// The token in `text`, without the whitespace around it (a token file's final
    /// newline). Refused when too short or not printable ASCII.
    pub fn new(text: &str) -> Result<Token, TokenError> {
        let text = text.trim();
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::NotPrintable);
        }
        if text.len() < MIN_TOKEN_BYTES {
            return Err(TokenError::TooShort(text.len()));
        }
        Ok(Token(text.into()))
    }

    /// Whether `given` is this token, in time that depends only on the lengths.
    fn matches(&self, given: &str) -> bool {
        spool::access::constant_time_eq(self.0.as_bytes(), given.as_bytes())
    }

    /// The token itself, for a server that checks it (never log it).
    pub fn secret(&self) -> &str {
        &self.0
    }
}

/// Who may send requests: see the module's table. `Access::default()` refuses
/// browsers only; the `spool-relay` command adds the host check when it listens on
/// loopback and the token when one is configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    token: Option<Token>,
    loopback_hosts_only: bool,
}

/// A refused request: its status and the message the client is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 or 403.
    pub status: u16,
    /// What the client (and the log) is told.
    pub message: String,
}

impl Access {
    /// Requests must carry `Authorization: Bearer TOKEN`.
    pub fn with_token(mut self, token: Token) -> Access {
        self.token = Some(token);
        self
    }

    /// Requests must name the relay by a loopback name in `Host`: for a relay that
    /// listens on loopback, against DNS rebinding.
    pub fn loopback_hosts_only(mut self) -> Access {
        self.loopback_hosts_only = true;
        self
    }

    /// Whether requests must carry a token.
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }

    /// Checks a request's headers; `Err` says why it is refused.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if let Some((name, value)) = browser_header(headers) {
            return Err(Refusal {
                status: 403,
                message: format!(
                    "spool-relay refuses requests from web browsers (this one carries \
                     {name}: {}). Use a server-side client; a browser page must not read or \
                     write through the relay.",
                    printable(value)
                ),
            });
        }
        if self.loopback_hosts_only {
            let host = header(headers, "host").unwrap_or("");
            if !spool::access::is_loopback_host(host) {
                return Err(Refusal {
                    status: 403,
                    message: format!(
                        "spool-relay listens on loopback and takes requests addressed to a \
                         loopback name only (localhost, 127.0.0.1, [::1]); this one names \
                         Host: \"{}\". Point the client at http://127.0.0.1:PORT.",
                        printable(host)
                    ),
                });
            }
        }
        if let Some(token) = &self.token {
            let given = header(headers, "authorization")
                .and_then(|value| value.strip_prefix("Bearer "))
                .map(str::trim);
            if !given.is_some_and(|given| token.matches(given)) {
                let why = if given.is_some() {
                    "the bearer token it carries is not the relay's"
                } else {
                    "it carries no Authorization: Bearer token"
                };
                return Err(Refusal {
                    status: 401,
                    message: format!(
                        "spool-relay requires a token and {why}. Give the client the token \
                         the relay was started with (--token-file or {TOKEN_ENV}) as its OAuth \
                         access token: docs/relay.md, \"Who can write through the relay\", \
                         shows the Node and Python settings."
                    ),
                });
            }
        }
        Ok(())
    }
}

impl Refusal {
    /// The answer, in the request's API (JSON or XML error), closing the connection;
    /// a 401 names the scheme it wants.
    pub fn reply(&self, api: Api) -> Reply {
        let reply =
            error_reply(api, self.status, Some(&self.message)).header("connection", "close");
        if self.status == 401 {
            reply.header("www-authenticate", "Bearer realm=\"spool-relay\"")
        } else {
            reply
        }
    }
}

/// The first header that only a web browser sends, if any: `Origin` (cross-origin
/// requests, and every `POST`), the Fetch Metadata headers `Sec-Fetch-*` (every
/// request of Chrome 76+, Firefox 90+, Safari 16.4+, set by the browser, which a
/// page cannot leave out: a `<script src>` or `<img>` GET carries no `Origin` but
/// carries these), and `Referer` (older browsers' subresource loads). No HTTP
/// client library or official Cloud Storage client sends any of them.
fn browser_header(headers: &HeaderMap) -> Option<(&str, &str)> {
    const NAMED: [&str; 2] = ["origin", "referer"];
    headers.iter().find_map(|(name, value)| {
        let name = name.as_str();
        let browser = NAMED.contains(&name) || name.starts_with("sec-fetch-");
        browser.then(|| (name, value.to_str().unwrap_or("(not text)")))
    })
}

/// `text` cut to 100 characters, control characters escaped: for messages.
fn printable(text: &str) -> String {
    text.chars()
        .take(100)
        .flat_map(char::escape_debug)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool::access::{constant_time_eq, is_loopback_host};

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn loopback_names_are_those_of_the_host_itself() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:4443",
            "127.1.2.3:1",
            "localhost",
            "LOCALHOST:4443",
            "relay.localhost:80",
            "[::1]",
            "[::1]:4443",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "evil.example",
            "evil.example:4443",
            "10.0.0.1:4443",
            "[::2]:1",
            "[::1]x",
            "localhost.evil.example",
            "0.0.0.0:4443",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_browser_is_refused_whatever_it_carries() {
        let access = Access::default().with_token(Token::new(TOKEN).unwrap());
        let bearer = format!("Bearer {TOKEN}");
        let refusal = access
            .check(&headers(&[
                ("origin", "http://example.com"),
                ("authorization", &bearer),
                ("host", "127.0.0.1:4443"),
            ]))
            .unwrap_err();
        assert_eq!(refusal.status, 403);
        assert!(
            refusal.message.contains("web browsers"),
            "{}",
            refusal.message
        );
        assert!(!refusal.message.contains(TOKEN));
        // Found by review (52/17): a page's <script src> or <img> GET carries no
        // Origin and a loopback Host, and read through the relay.
        for (name, value) in [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
            ("sec-fetch-dest", "script"),
            ("referer", "https://evil.example/page"),
        ] {
            let refusal = access
                .check(&headers(&[
                    (name, value),
                    ("authorization", &bearer),
                    ("host", "127.0.0.1:4443"),
                ]))
                .unwrap_err();
            assert_eq!(refusal.status, 403, "{name}");
            assert!(refusal.message.contains(name), "{}", refusal.message);
        }
        // What the official clients send passes.
        let client = headers(&[
            ("authorization", &bearer),
            ("host", "127.0.0.1:4443"),
            ("user-agent", "gcloud-python/3.17.1"),
            ("x-goog-api-client", "gl-python/3.11.7"),
        ]);
        assert_eq!(access.check(&client), Ok(()));
    }

    #[test]
    fn the_token_is_required_exactly() {
        let access = Access::default()
            .loopback_hosts_only()
            .with_token(Token::new(TOKEN).unwrap());
        let with = |auth: &str| {
            access.check(&headers(&[
                ("host", "127.0.0.1:4443"),
                ("authorization", auth),
            ]))
        };
        assert_eq!(with(&format!("Bearer {TOKEN}")), Ok(()));
        for wrong in [
            format!("Bearer {TOKEN}x"),
            format!("Bearer {}", &TOKEN[1..]),
            format!("Basic {TOKEN}"),
            "Bearer ".into(),
        ] {
            let refusal = with(&wrong).unwrap_err();
            assert_eq!(refusal.status, 401, "{wrong}");
            assert!(!refusal.message.contains(TOKEN), "{}", refusal.message);
        }
        let none = access
            .check(&headers(&[("host", "localhost")]))
            .unwrap_err();
        assert!(
            none.message.contains("carries no Authorization"),
            "{}",
            none.message
        );
        let reply = none.reply(Api::Json);
        assert!(
            reply
                .headers
                .iter()
                .any(|(k, v)| k == "www-authenticate" && v.starts_with("Bearer"))
        );
    }

    #[test]
    fn a_loopback_relay_refuses_other_host_names() {
        let access = Access::default().loopback_hosts_only();
        assert_eq!(
            access.check(&headers(&[("host", "localhost:4443")])),
            Ok(())
        );
        let refusal = access
            .check(&headers(&[("host", "rebound.example:4443")]))
            .unwrap_err();
        assert_eq!(refusal.status, 403);
        assert!(
            refusal.message.contains("rebound.example"),
            "{}",
            refusal.message
        );
        assert!(access.check(&HeaderMap::new()).is_err());
        // Found by review: the port was not checked, so this passed and ended up in
        // the session URLs the relay hands out.
        for host in [
            "127.0.0.1:1@evil.example",
            "[::1]:80@evil.example",
            "localhost:",
            "[::1]x",
        ] {
            let refused = access.check(&headers(&[("host", host)]));
            assert!(refused.is_err(), "{host} passed as a loopback name");
        }
        assert_eq!(access.check(&headers(&[("host", "[::1]:4443")])), Ok(()));
        // Without the host check (a non-loopback listener), any name will do.
        assert_eq!(
            Access::default().check(&headers(&[("host", "relay.internal:4443")])),
            Ok(())
        );
    }

    #[test]
    fn tokens_are_long_printable_and_never_shown() {
        assert_eq!(Token::new("short"), Err(TokenError::TooShort(5)));
        assert_eq!(
            Token::new("with a space 0123456789abcdef"),
            Err(TokenError::NotPrintable)
        );
        let token = Token::new(&format!("  {TOKEN}\n")).unwrap();
        assert!(token.matches(TOKEN));
        assert!(!format!("{token:?}").contains(TOKEN));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
