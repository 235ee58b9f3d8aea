//! The bytes of a file about to be created, in the pieces a put holds them in.
//!
//! An entry file is a header the spool builds and a payload the caller handed over.
//! [`Contents`] keeps the two apart so that no put copies a payload into a second
//! buffer: [`super::StdDisk`] writes both pieces with one `writev`, and a simulated
//! disk can keep the caller's buffer as it is. Only the bytes in order mean anything:
//! two `Contents` with the same bytes split at different places are equal.

use bytes::{Bytes, BytesMut};

/// A file's bytes: `head` followed by `body`.
#[derive(Debug, Clone, Default)]
pub struct Contents {
    /// The first bytes (an entry's header, name and attributes).
    pub head: Bytes,
    /// The bytes after `head` (an entry's payload, as the caller gave it).
    pub body: Bytes,
}

impl Contents {
    /// `head` followed by `body`.
    pub fn new(head: Bytes, body: Bytes) -> Self {
        Self { head, body }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Whether there are no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `len` bytes (all of them if there are fewer), without copying.
    pub fn prefix(&self, len: usize) -> Self {
        if len <= self.head.len() {
            return Self::from(self.head.slice(..len));
        }
        let body = len.saturating_sub(self.head.len()).min(self.body.len());
        Self::new(self.head.clone(), self.body.slice(..body))
    }

    /// The bytes in one buffer; copies only when both pieces hold bytes.
    pub fn to_bytes(&self) -> Bytes {
        match (self.head.is_empty(), self.body.is_empty()) {
            (_, true) => self.head.clone(),
            (true, false) => self.body.clone(),
            (false, false) => {
                let mut joined = BytesMut::with_capacity(self.len());
                joined.extend_from_slice(&self.head);
                joined.extend_from_slice(&self.body);
                joined.freeze()
            }
        }
    }

    /// The bytes in a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut joined = Vec::with_capacity(self.len());
        joined.extend_from_slice(&self.head);
        joined.extend_from_slice(&self.body);
        joined
    }

    /// The byte at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<u8> {
        match index.checked_sub(self.head.len()) {
            None => Some(self.head[index]),
            Some(i) => self.body.get(i).copied(),
        }
    }

    /// The two pieces, in order (either may be empty).
    pub fn pieces(&self) -> [&[u8]; 2] {
        [&self.head, &self.body]
    }
}

impl From<Bytes> for Contents {
    fn from(bytes: Bytes) -> Self {
        Self::new(bytes, Bytes::new())
    }
}

impl From<&'static [u8]> for Contents {
    fn from(bytes: &'static [u8]) -> Self {
        Self::from(Bytes::from_static(bytes))
    }
}

impl From<Vec<u8>> for Contents {
    fn from(bytes: Vec<u8>) -> Self {
        Self::from(Bytes::from(bytes))
    }
}

impl PartialEq for Contents {
    fn eq(&self, other: &Self) -> bool {
        if self.head.len() == other.head.len() {
            return self.head == other.head && self.body == other.body;
        }
        self.len() == other.len() && self.to_vec() == other.to_vec()
    }
}

impl Eq for Contents {}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(bytes: &'static [u8], at: usize) -> Contents {
        let all = Bytes::from_static(bytes);
        Contents::new(all.slice(..at), all.slice(at..))
    }

    #[test]
    fn the_same_bytes_split_anywhere_are_equal() {
        for at in 0..=5 {
            assert_eq!(split(b"hello", at), Contents::from(&b"hello"[..]), "{at}");
            assert_ne!(split(b"hellO", at), Contents::from(&b"hello"[..]), "{at}");
        }
        assert_ne!(split(b"hello", 2), Contents::from(&b"hell"[..]));
    }

    #[test]
    fn prefix_get_and_join_agree_with_the_flat_bytes() {
        let flat = b"header+payload";
        for at in 0..=flat.len() {
            let contents = split(flat, at);
            assert_eq!(contents.len(), flat.len());
            assert_eq!(contents.to_vec(), flat);
            assert_eq!(contents.to_bytes(), &flat[..]);
            for len in 0..=flat.len() + 1 {
                let want = &flat[..len.min(flat.len())];
                assert_eq!(
                    contents.prefix(len).to_vec(),
                    want,
                    "split {at}, prefix {len}"
                );
            }
            for i in 0..=flat.len() {
                assert_eq!(
                    contents.get(i),
                    flat.get(i).copied(),
                    "split {at}, byte {i}"
                );
            }
        }
    }

    #[test]
    fn joining_copies_only_when_both_pieces_hold_bytes() {
        let body = Bytes::from_static(b"payload");
        let joined = Contents::new(Bytes::new(), body.clone()).to_bytes();
        assert_eq!(
            joined.as_ptr(),
            body.as_ptr(),
            "a lone body is shared, not copied"
        );
    }
}
