//! How an app host writes through the relay: [`RelayClient`], `object_store`'s GCS
//! client, the one a user points at an emulator endpoint, at `http://relay:4443`,
//! create-if-absent (or overwriting, in a scenario with overwrites), with the write's
//! attributes. What the caller is told comes from
//! the relay's HTTP answer ([`RelayAnswer`]). A write in flight when the relay's
//! process ends (a crash or restart, or a connection its graceful stop closed before
//! reading the request) has no answer; the world makes it unknown then.
//!
//! The same client reads through the relay (`[relay] reads_per_write`,
//! `lists_per_write`): a `GET` of a name ([`ReadAnswer`]: the bytes' length and
//! crc32c, and whether the relay served them from its spool), a list of a
//! prefix, every page (XML `list-type=2`, as `object_store` lists), and a
//! `DELETE` of a name.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt as _;
use object_store::path::Path;
use object_store::{Attributes, GetOptions, ObjectStore, ObjectStoreExt as _, PutOptions};
use relay::{OUTCOME_HEADER, OUTCOME_SPOOLED, OUTCOME_STORED};
use spool::Remote;

use super::control::{BUCKET, RELAY_HOST, RELAY_PORT};
use crate::connector::{Exchange, TurmoilConnector};
use crate::ledger::Told;
use crate::recorder::{DeleteAnswer, ReadAnswer};

/// What the relay's answer tells the caller of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayAnswer {
    /// An HTTP answer: 200 with `x-spool-outcome: stored` or `spooled`, 503 (spool
    /// full, or not taking writes now) or 413 as backpressure (`Rejected`), any
    /// other status `Failed`.
    Told(Told),
    /// The write never reached the relay: no connection (it was down: connection
    /// refused), or a name the client cannot express. The caller is told it
    /// failed.
    Unreached,
    /// The request went out and no answer came back: the relay's process ended
    /// with it in flight. The caller cannot know whether it landed.
    NoAnswer,
}

/// An app host's client for the relay: the production GCS client at
/// `http://relay:4443` over turmoil TCP, a fresh connection per write (so an
/// error before the connection is up means the relay never saw the write), no
/// retries of its own.
#[derive(Debug, Clone)]
pub struct RelayClient {
    remote: Remote,
}

impl RelayClient {
    /// A client for the relay host.
    pub fn new() -> object_store::Result<Self> {
        let base = format!("http://{RELAY_HOST}:{RELAY_PORT}");
        let store =
            crate::connector::gcs_store_over(&base, BUCKET, TurmoilConnector { max_idle: 0 })?;
        Ok(Self {
            remote: Remote::new(store),
        })
    }

    /// Writes `payload` as `name` in `mode` (create-if-absent sends
    /// `ifGenerationMatch: 0`; an overwrite, no precondition), with `attributes`.
    ///
    /// `object_store` returns neither the response's headers nor, on an error, its
    /// status in a form worth parsing, so the transport records both in an
    /// [`Exchange`] the request carries in its extensions (`PutOptions::extensions`,
    /// which the GCS client puts on the HTTP request). Reading the relay's metrics
    /// or the fake's counters instead would tell the bench what the relay thinks,
    /// not what this caller heard.
    pub async fn write(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
        mode: spool::WriteMode,
    ) -> RelayAnswer {
        let Ok(path) = self.remote.path(name) else {
            // The client cannot express the name: nothing was sent.
            return RelayAnswer::Unreached;
        };
        let exchange = Exchange::default();
        let mut options = PutOptions {
            mode: mode.put_mode(),
            attributes: attributes.clone(),
            ..PutOptions::default()
        };
        options.extensions.insert(exchange.clone());
        let store: &Arc<dyn ObjectStore> = self.remote.store();
        let result = store.put_opts(&path, payload.into(), options).await;
        answer(result.is_ok(), &exchange)
    }
}

impl RelayClient {
    /// Reads `name` through the relay: what came back.
    pub async fn read(&self, name: &str) -> ReadAnswer {
        let Ok(path) = self.remote.path(name) else {
            return ReadAnswer::Failed;
        };
        let exchange = Exchange::default();
        let mut options = GetOptions::default();
        options.extensions.insert(exchange.clone());
        let store: &Arc<dyn ObjectStore> = self.remote.store();
        let bytes = match store.get_opts(&path, options).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        };
        match bytes {
            Ok(bytes) => ReadAnswer::Bytes {
                len: bytes.len() as u64,
                crc32c: crc32c::crc32c(&bytes),
                from_spool: exchange.seen().header(OUTCOME_HEADER).as_deref()
                    == Some(OUTCOME_SPOOLED),
            },
            Err(object_store::Error::NotFound { .. }) => ReadAnswer::NotFound,
            Err(_) => ReadAnswer::Failed,
        }
    }

    /// Deletes `name` through the relay: what came back.
    pub async fn delete(&self, name: &str) -> DeleteAnswer {
        let Ok(path) = self.remote.path(name) else {
            return DeleteAnswer::Failed;
        };
        let store: &Arc<dyn ObjectStore> = self.remote.store();
        match store.delete(&path).await {
            Ok(()) => DeleteAnswer::Deleted,
            Err(object_store::Error::NotFound { .. }) => DeleteAnswer::NotFound,
            Err(_) => DeleteAnswer::Failed,
        }
    }

    /// Lists every object under `prefix` (a directory, as `object_store` lists)
    /// through the relay, every page; `None` when a page failed.
    pub async fn list(&self, prefix: &str) -> Option<Vec<String>> {
        let store: &Arc<dyn ObjectStore> = self.remote.store();
        let prefix = Path::from(prefix);
        let listed = store.list(Some(&prefix));
        let names = listed.map_ok(|meta| meta.location.to_string());
        names.try_collect().await.ok()
    }
}

/// The caller's answer from what the transport saw (`put_ok`: the client accepted
/// the response as a successful write).
fn answer(put_ok: bool, exchange: &Exchange) -> RelayAnswer {
    let seen = exchange.seen();
    let Some(status) = seen.status else {
        return if seen.connected {
            RelayAnswer::NoAnswer
        } else {
            RelayAnswer::Unreached
        };
    };
    let outcome = seen.header(OUTCOME_HEADER);
    RelayAnswer::Told(match status {
        200 if put_ok && outcome.as_deref() == Some(OUTCOME_SPOOLED) => Told::Spooled,
        // The relay answers 200 only once the write is safe; the header says where
        // (a 200 without it would be the relay's bug: the counters check catches a
        // spooled write counted here as stored).
        200 if put_ok && outcome.as_deref().is_none_or(|o| o == OUTCOME_STORED) => Told::Stored,
        503 | 413 => Told::Rejected,
        _ => Told::Failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_follows_the_status_and_the_outcome_header() {
        let seen = |connected: bool, status: Option<u16>, outcome: Option<&str>| {
            let exchange = Exchange::default();
            if connected {
                exchange.connected();
            }
            if let Some(status) = status {
                let mut headers = http::HeaderMap::new();
                if let Some(outcome) = outcome {
                    headers.insert(OUTCOME_HEADER, outcome.parse().unwrap());
                }
                exchange.answered(http::StatusCode::from_u16(status).unwrap(), &headers);
            }
            exchange
        };
        let told = |t| RelayAnswer::Told(t);
        assert_eq!(
            answer(true, &seen(true, Some(200), Some("stored"))),
            told(Told::Stored)
        );
        assert_eq!(
            answer(true, &seen(true, Some(200), Some("spooled"))),
            told(Told::Spooled)
        );
        assert_eq!(
            answer(false, &seen(true, Some(503), None)),
            told(Told::Rejected)
        );
        assert_eq!(
            answer(false, &seen(true, Some(403), None)),
            told(Told::Failed)
        );
        assert_eq!(
            answer(false, &seen(false, None, None)),
            RelayAnswer::Unreached
        );
        assert_eq!(
            answer(false, &seen(true, None, None)),
            RelayAnswer::NoAnswer
        );
    }
}
