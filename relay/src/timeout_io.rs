//! [`TimeoutIo`]: a connection's byte stream whose reads and writes fail with
//! `TimedOut` once one has waited `limit` without moving a byte. The server wraps
//! every connection in one, so a client that stops sending a request body (or stops
//! reading an answer) midway holds its connection, its buffers and its place under
//! `--max-connections` for at most `limit`, not forever.
//!
//! Only an operation that is waiting counts: the clock starts when a read (or a
//! write) returns `Pending` and stops at the next one that moves bytes. hyper reads
//! a request body only while the handler asks for more, and (with half-close on, as
//! the server sets it) does not read while the handler works on a request whose body
//! it has read, so the time a handler takes is not counted. An idle keep-alive
//! connection is closed earlier by hyper's header read timeout.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A byte stream whose waiting reads and writes time out after `limit` without
/// progress.
pub(crate) struct TimeoutIo<I> {
    io: I,
    limit: Duration,
    read: Stall,
    write: Stall,
}

/// The timer of one direction: armed while an operation waits.
struct Stall {
    timer: Pin<Box<Sleep>>,
    armed: bool,
}

impl Stall {
    fn new() -> Self {
        Stall {
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed: false,
        }
    }

    /// After the inner operation returned `Pending`: starts the clock if it is not
    /// running, and fails once it has run `limit`.
    fn poll_waiting(
        &mut self,
        cx: &mut Context<'_>,
        limit: Duration,
        what: &str,
    ) -> Poll<io::Error> {
        if !self.armed {
            self.armed = true;
            self.timer.as_mut().reset(Instant::now() + limit);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.armed = false;
                Poll::Ready(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no bytes {what} for {}: the connection is closed (--body-timeout)",
                        humantime::format_duration(limit)
                    ),
                ))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<I> TimeoutIo<I> {
    pub(crate) fn new(io: I, limit: Duration) -> Self {
        TimeoutIo {
            io,
            limit,
            read: Stall::new(),
            write: Stall::new(),
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for TimeoutIo<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.read.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => this
                .read
                .poll_waiting(cx, this.limit, "from the client")
                .map(Err),
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TimeoutIo<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, data) {
            Poll::Ready(result) => {
                this.write.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => this
                .write
                .poll_waiting(cx, this.limit, "taken by the client")
                .map(Err),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => {
                this.write.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => this
                .write
                .poll_waiting(cx, this.limit, "taken by the client")
                .map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_read_waiting_longer_than_the_limit_fails_and_progress_restarts_the_clock() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut server = TimeoutIo::new(server, Duration::from_secs(60));
        let started = Instant::now();
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 1];
            let mut got = 0;
            loop {
                match server.read(&mut buf).await {
                    Ok(0) => return Ok(got),
                    Ok(_) => got += 1,
                    Err(e) => return Err((e, got)),
                }
            }
        });
        // A byte every 50 s keeps it going; then silence.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(50)).await;
            client.write_all(b"x").await.unwrap();
        }
        let (error, got) = reading.await.unwrap().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("--body-timeout"), "{error}");
        assert_eq!(got, 3);
        assert_eq!(started.elapsed(), Duration::from_secs(150 + 60));
        drop(client);
    }
}
