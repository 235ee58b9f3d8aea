//! HTTPS on a listener: a certificate chain and its private key read from PEM files
//! (`--tls-cert`, `--tls-key`) into a rustls server configuration that speaks
//! HTTP/1.1 only. Used by `fake-gcs` and by `spool-relay`, for the clients that
//! speak only HTTPS to a Cloud Storage endpoint (gsutil's JSON API, for one).
//!
//! Promises: a file that cannot be read, holds no certificate or no key, or a key
//! that does not match is refused at start with its path named
//! ([`TlsError`]); nothing is read again afterwards (a renewed certificate takes a
//! restart). A handshake is given [`HANDSHAKE_TIMEOUT`] before the connection is
//! dropped, so a client that connects and says nothing holds no task for long.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
pub use tokio_rustls::TlsAcceptor;

/// How long a client has to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a certificate and key cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read or is not PEM.
    #[error("cannot read the TLS certificate {path}: {detail}")]
    Cert {
        /// The certificate file.
        path: PathBuf,
        /// What reading it said.
        detail: String,
    },
    /// The certificate file holds no certificate.
    #[error("the TLS certificate file {path} holds no CERTIFICATE block")]
    NoCert {
        /// The certificate file.
        path: PathBuf,
    },
    /// The key file cannot be read, is not PEM, or holds no private key.
    #[error("cannot read a private key from {path}: {detail}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What reading it said.
        detail: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("the TLS certificate {cert} and key {key} cannot serve: {source}")]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        source: rustls::Error,
    },
}

/// A TLS acceptor for the certificate chain in `cert` and the key in `key` (both
/// PEM; the key PKCS#8, PKCS#1 or SEC1).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let chain = read_chain(cert)?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.to_path_buf(),
        detail: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| {
            builder
                .with_no_client_auth()
                .with_single_cert(chain, private)
        })
        .map_err(|source| TlsError::Config {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            source,
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_chain(cert: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let unreadable = |e: rustls::pki_types::pem::Error| TlsError::Cert {
        path: cert.to_path_buf(),
        detail: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(unreadable)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(unreadable)?;
    if chain.is_empty() {
        return Err(TlsError::NoCert {
            path: cert.to_path_buf(),
        });
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cert: &Path, key: &Path) -> TlsError {
        match acceptor(cert, key) {
            Ok(_) => panic!("{} and {} were taken", cert.display(), key.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn missing_empty_and_mismatched_files_are_named() {
        let dir = std::env::temp_dir().join(format!("fake-gcs-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let missing = refused(&cert, &key);
        assert!(matches!(missing, TlsError::Cert { .. }), "{missing}");
        assert!(missing.to_string().contains("cert.pem"), "{missing}");
        std::fs::write(&cert, "not a certificate\n").unwrap();
        let empty = refused(&cert, &key);
        assert!(matches!(empty, TlsError::NoCert { .. }), "{empty}");
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        let no_key = refused(&cert, &key);
        assert!(matches!(no_key, TlsError::Key { .. }), "{no_key}");
        std::fs::write(&key, other.signing_key.serialize_pem()).unwrap();
        let mismatched = refused(&cert, &key);
        assert!(
            matches!(mismatched, TlsError::Config { .. }),
            "{mismatched}"
        );
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        assert!(acceptor(&cert, &key).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
