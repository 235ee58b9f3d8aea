//! Who may talk to an HTTP endpoint on this host (feature `http`): the checks the
//! metrics endpoint and `spool-relay` share.
//!
//! - [`is_loopback_host`]: a `Host` header naming this host by a loopback name.
//!   An endpoint listening on loopback refuses any other name: DNS rebinding lets
//!   a web page make its own name resolve to 127.0.0.1 and reach the endpoint as a
//!   same-origin server.
//! - [`constant_time_eq`]: a token comparison whose time depends on the lengths
//!   only, never on where the bytes differ.

/// `localhost`, `*.localhost`, an IPv4 address in 127/8 or `[::1]`, each with an
/// optional port of digits only (`127.0.0.1:1@evil.example` is not one).
pub fn is_loopback_host(host: &str) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, "")) => (addr, None),
            Some((addr, rest)) => match rest.strip_prefix(':') {
                Some(port) => (addr, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let digits = |p: &str| p.parse::<u16>().is_ok() && p.bytes().all(|b| b.is_ascii_digit());
    if port.is_some_and(|p| !digits(p)) {
        return false;
    }
    let name = name.to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// `a == b`, looking at every byte of the longer one whatever they hold.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut differ = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        differ = std::hint::black_box(differ | (x ^ y));
    }
    differ == 0
}

/// Whether an `Authorization` header value is `Bearer TOKEN` for `token`.
pub fn bearer_matches(authorization: Option<&str>, token: &str) -> bool {
    let given = authorization
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    given.is_some_and(|given| constant_time_eq(token.as_bytes(), given.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_are_those_of_the_host_itself_with_a_port_of_digits() {
        for host in [
            "localhost",
            "localhost:4443",
            "a.localhost",
            "127.0.0.1:9",
            "[::1]",
            "[::1]:80",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        // The port was not checked once: this passed and ended up in session URLs.
        for host in [
            "rebound.example:4443",
            "127.0.0.1:1@evil.example",
            "[::1]:80@evil.example",
            "localhost:",
            "[::1]x",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn tokens_are_compared_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }
}
