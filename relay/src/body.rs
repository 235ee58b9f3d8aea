//! A request body read in pieces as it arrives, never whole: [`Pieces`] gathers the
//! frames hyper hands over into pieces of at most [`PIECE_BYTES`], so memory per
//! request is one piece whatever the object's size, and stops at a limit.

use bytes::{Bytes, BytesMut};
use fake_gcs::wire::Rejection;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Incoming};

use crate::metrics::RelayMetrics;

/// The largest piece handed on (to the spool's temp file, a session's chunk file):
/// big enough that a write is worth a system call, small enough to be a buffer.
pub const PIECE_BYTES: usize = 1 << 20;

/// Why a body could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// More bytes than the limit.
    #[error("The request body exceeds the relay's limit of {limit} bytes.")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The connection broke, or the body was malformed (a body shorter than its
    /// `Content-Length` ends this way when the client closes).
    #[error("The request body could not be read: {0}")]
    Broken(String),
}

/// The largest body of a request that carries no object bytes (a resumable
/// session's opening resource, a JSON resource passed through), and so the room
/// a multipart body has beside its media ([`crate::MULTIPART_OVERHEAD_BYTES`]).
pub(crate) const MAX_RESOURCE_BYTES: u64 = 64 * 1024;

impl BodyError {
    /// The refusal a client is answered with: 413 past the limit, 400 else.
    pub(crate) fn rejection(self) -> Rejection {
        let status = match self {
            BodyError::TooLarge { .. } => 413,
            BodyError::Broken(_) => 400,
        };
        Rejection::status(status, self.to_string())
    }
}

/// A body read in pieces; see the module doc.
pub struct Pieces<B = Incoming> {
    body: B,
    buffered: BytesMut,
    limit: u64,
    read: u64,
    ended: bool,
    /// Where bytes read are counted.
    metrics: Option<RelayMetrics>,
    /// This request's bytes read, for its log line.
    tally: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl<B> Pieces<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    /// Reads `body`, refusing more than `limit` bytes in all.
    pub fn new(body: B, limit: u64) -> Self {
        Self {
            body,
            buffered: BytesMut::new(),
            limit,
            read: 0,
            ended: false,
            metrics: None,
            tally: None,
        }
    }

    /// Adds the bytes read to `tally` too.
    pub fn tallied(mut self, tally: std::sync::Arc<std::sync::atomic::AtomicU64>) -> Self {
        self.tally = Some(tally);
        self
    }

    /// Counts the bytes read in `metrics` (`spool_relay_received_bytes_total`).
    pub fn counted(mut self, metrics: &RelayMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Refuses more than `limit` bytes in all (never more than the limit set before).
    pub fn limited(mut self, limit: u64) -> Self {
        self.limit = self.limit.min(limit);
        self
    }

    /// The next piece: [`PIECE_BYTES`] unless it is the last, `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Bytes>, BodyError> {
        while !self.ended && self.buffered.len() < PIECE_BYTES {
            match self.body.frame().await {
                None => self.ended = true,
                Some(Err(e)) => return Err(BodyError::Broken(e.to_string())),
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers
                    };
                    self.read += data.len() as u64;
                    if let Some(metrics) = &self.metrics {
                        metrics.received(data.len());
                    }
                    if let Some(tally) = &self.tally {
                        tally.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                    if self.read > self.limit {
                        return Err(BodyError::TooLarge { limit: self.limit });
                    }
                    self.buffered.extend_from_slice(&data);
                }
            }
        }
        if self.buffered.is_empty() {
            return Ok(None);
        }
        let take = self.buffered.len().min(PIECE_BYTES);
        Ok(Some(self.buffered.split_to(take).freeze()))
    }

    /// The whole rest of the body, for the small bodies that are read whole (a
    /// resumable session's opening resource); its limit is the caller's.
    pub async fn whole(mut self) -> Result<Bytes, BodyError> {
        let mut all = BytesMut::new();
        while let Some(piece) = self.next().await? {
            all.extend_from_slice(&piece);
        }
        Ok(all.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    fn body(frames: Vec<usize>) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let frames = frames
            .into_iter()
            .map(|n| Ok(Frame::data(Bytes::from(vec![7u8; n]))));
        StreamBody::new(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn pieces_are_full_but_for_the_last_and_the_limit_is_enforced() {
        let mut pieces = Pieces::new(body(vec![300_000; 8]), u64::MAX);
        let mut sizes = Vec::new();
        while let Some(piece) = pieces.next().await.unwrap() {
            sizes.push(piece.len());
        }
        assert_eq!(
            sizes,
            [PIECE_BYTES, PIECE_BYTES, 2_400_000 - 2 * PIECE_BYTES]
        );
        let mut limited = Pieces::new(body(vec![600_000, 600_000]), 1_000_000);
        assert_eq!(
            limited.next().await,
            Err(BodyError::TooLarge { limit: 1_000_000 })
        );
        assert_eq!(
            Pieces::new(body(vec![]), 10).next().await,
            Ok(None),
            "an empty body has no piece"
        );
    }
}
