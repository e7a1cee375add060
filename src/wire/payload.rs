//! A request body: bytes in memory, or a reader streamed from a thread of its own (a spooled
//! pack, an LFS object) so that no more than a few chunks are held at once.

use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// The bytes a request sends.
pub enum Payload {
    /// All in memory.
    Bytes(Vec<u8>),
    /// Read as it goes out; `len` known or not (then sent chunked).
    Reader {
        /// Where the bytes come from.
        reader: Box<dyn Read + Send>,
        /// How many there are, when known (a Content-Length).
        len: Option<u64>,
    },
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Payload::Bytes(bytes)
    }
}

/// Chunks handed from the reading thread to the connection.
const CHUNK: usize = 64 << 10;

impl Payload {
    /// `reader`'s `len` bytes, sent with a Content-Length.
    pub fn sized(reader: impl Read + Send + 'static, len: u64) -> Self {
        Payload::Reader {
            reader: Box::new(reader),
            len: Some(len),
        }
    }

    /// `reader`'s bytes, sent chunked.
    pub fn chunked(reader: impl Read + Send + 'static) -> Self {
        Payload::Reader {
            reader: Box::new(reader),
            len: None,
        }
    }

    /// Its length, when known (a Content-Length).
    pub fn known_len(&self) -> Option<u64> {
        match self {
            Payload::Bytes(b) => Some(b.len() as u64),
            Payload::Reader { len, .. } => *len,
        }
    }

    /// As reqwest's body. A reader runs on a thread of its own, a few chunks ahead of the
    /// connection; it stops when the request is dropped.
    pub(super) fn into_body(self) -> reqwest::Body {
        match self {
            Payload::Bytes(b) => b.into(),
            Payload::Reader { mut reader, len } => {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                std::thread::spawn(move || {
                    loop {
                        let mut buf = vec![0; CHUNK];
                        let item = match reader.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => {
                                buf.truncate(n);
                                Ok(Bytes::from(buf))
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => Err(e),
                        };
                        let failed = item.is_err();
                        if tx.blocking_send(item).is_err() || failed {
                            return;
                        }
                    }
                });
                reqwest::Body::wrap(Channel { rx, len })
            }
        }
    }
}

/// A body whose chunks come from the reading thread.
struct Channel {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>,
    len: Option<u64>,
}

impl http_body::Body for Channel {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|chunk| chunk.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        self.len
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
