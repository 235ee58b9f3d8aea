//! Connection places for an HTTP server (feature `http`): the metrics endpoint's
//! and `spool-relay`'s. A server takes a [`Place`] before it accepts, so a
//! connection over the limit waits unread in the kernel's listen backlog, and
//! holds it until the connection closes.
//!
//! What it promises ([`Places`]):
//!
//! - At most `max_connections` places are held at once.
//! - When all are held, the connection idle the longest (one that has not finished
//!   sending a request's head, a TLS handshake, or is between requests), once it
//!   has been idle [`IDLE_BEFORE_CLOSING`], is told to close ([`Place::closing`])
//!   and its place given to the next: a client that opens connections and sends
//!   nothing cannot keep others out (the metrics endpoint's probes, the relay's
//!   uploads). A connection serving a request is never told to close for room; only
//!   when every one serves does a new one wait, until one closes.
//! - The gauge given to [`Places::new`] is the number of places held, changed
//!   with the table.
//!
//! Beside it, what a server logs when an accept fails ([`accept_error_advice`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a connection is left to send a request's head (or its next one) before
/// it may be closed to make room: long enough for any client that is sending, so
/// that a full server does not close the connections it has just accepted.
pub const IDLE_BEFORE_CLOSING: Duration = Duration::from_secs(1);

/// The places of one server. Cheap to clone; clones share the table.
#[derive(Clone)]
pub struct Places {
    table: Arc<Table>,
}

impl std::fmt::Debug for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Places")
            .field("open", &self.open())
            .field("max_connections", &self.table.max_connections)
            .finish()
    }
}

struct Table {
    /// Who serves: named in the log line of a connection closed for room.
    server: &'static str,
    max_connections: usize,
    state: Mutex<State>,
    /// A place was given back, or a connection finished a request (it may be
    /// closed to make room).
    changed: Notify,
    /// Places held, for a gauge.
    open: Gauge,
}

#[derive(Default)]
struct State {
    held: BTreeMap<u64, Held>,
    next_id: u64,
    /// Connections told to close for room, for the log.
    closed_idle: u64,
}

struct Held {
    /// Since when it waits for a request's head; `None` while it serves one.
    idle_since: Option<Instant>,
    /// Told to close (to make room) once.
    close: Arc<Notify>,
    closing: bool,
}

/// A place under the limit, held by one connection until it is dropped.
pub struct Place {
    table: Arc<Table>,
    id: u64,
    close: Arc<Notify>,
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place").field("id", &self.id).finish()
    }
}

/// Marks the requests of a connection as they start and end; cheap to clone into
/// a service function.
#[derive(Clone)]
pub struct Serving {
    table: Arc<Table>,
    id: u64,
}

impl Places {
    /// At most `max_connections` places (at least 1) for the server named
    /// `server` (in its log lines: "spool-relay", "the metrics endpoint"), the
    /// number held kept in `open` (a gauge the server exports, or a new one).
    pub fn new(server: &'static str, max_connections: usize, open: Gauge) -> Self {
        assert!(max_connections >= 1, "a server needs a place");
        open.set(0);
        Places {
            table: Arc::new(Table {
                server,
                max_connections,
                state: Mutex::new(State::default()),
                changed: Notify::new(),
                open,
            }),
        }
    }

    /// A place for one more connection: at once when fewer than `max_connections`
    /// are held; otherwise the connection idle the longest is told to close and its
    /// place taken once it has; when none is idle, the place of the first
    /// connection to close. Call it before accepting.
    pub async fn take(&self) -> Place {
        loop {
            let changed = self.table.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let idle_enough_at = match self.try_take() {
                Ok(place) => return place,
                Err(at) => at,
            };
            match idle_enough_at {
                Some(at) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// A free place; or, after telling the connection idle the longest to close
    /// (if one has been idle [`IDLE_BEFORE_CLOSING`]), when the next one will have
    /// been (if any is idle).
    fn try_take(&self) -> Result<Place, Option<Instant>> {
        let table = &self.table;
        let mut state = table.state();
        if state.held.len() < table.max_connections {
            let id = state.next_id;
            state.next_id += 1;
            let close = Arc::new(Notify::new());
            let held = Held {
                idle_since: Some(Instant::now()),
                close: close.clone(),
                closing: false,
            };
            state.held.insert(id, held);
            table.open.set(state.held.len() as i64);
            return Ok(Place {
                table: table.clone(),
                id,
                close,
            });
        }
        let longest_idle = (state.held.values_mut())
            .filter(|held| !held.closing)
            .filter_map(|held| Some((held.idle_since?, held)))
            .min_by_key(|(since, _)| *since);
        let Some((since, held)) = longest_idle else {
            return Err(None);
        };
        let idle_enough_at = since + IDLE_BEFORE_CLOSING;
        if idle_enough_at > Instant::now() {
            return Err(Some(idle_enough_at));
        }
        held.closing = true;
        held.close.notify_one();
        state.closed_idle += 1;
        let closed_idle = state.closed_idle;
        if closed_idle == 1 || closed_idle.is_multiple_of(100) {
            tracing::info!(
                server = table.server,
                max_connections = table.max_connections,
                times = closed_idle,
                "serving as many connections as allowed: closing the one idle the longest \
                 (no request in progress) to make room"
            );
        }
        Err(None)
    }

    /// Places held now.
    pub fn open(&self) -> usize {
        self.table.state().held.len()
    }

    /// Waits until no place is held.
    pub async fn all_given_back(&self) {
        loop {
            let changed = self.table.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.open() == 0 {
                return;
            }
            changed.await;
        }
    }
}

impl Table {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Place {
    /// Resolves once the connection is told to close to make room; the caller
    /// closes it if it serves no request then ([`Place::is_idle`]), or after the
    /// request it serves.
    pub async fn closing(&self) {
        self.close.notified().await;
    }

    /// Whether the connection serves no request now.
    pub fn is_idle(&self) -> bool {
        let state = self.table.state();
        (state.held.get(&self.id)).is_some_and(|held| held.idle_since.is_some())
    }

    /// The handle a service function marks its requests with.
    pub fn serving(&self) -> Serving {
        Serving {
            table: self.table.clone(),
            id: self.id,
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut state = self.table.state();
        state.held.remove(&self.id);
        self.table.open.set(state.held.len() as i64);
        drop(state);
        self.table.changed.notify_waiters();
    }
}

impl Serving {
    /// The connection starts serving a request: it is not closed for room.
    pub fn started(&self) {
        self.mark(true);
    }

    /// The connection has answered its request and waits for the next.
    pub fn ended(&self) {
        self.mark(false);
    }

    fn mark(&self, serving: bool) {
        let mut state = self.table.state();
        if let Some(held) = state.held.get_mut(&self.id) {
            held.idle_since = (!serving).then(Instant::now);
        }
        drop(state);
        if !serving {
            self.table.changed.notify_waiters();
        }
    }
}

/// What an operator can do about a failed accept of `server` (which takes one
/// descriptor per connection, and at most `max_connections`).
pub fn accept_error_advice(e: &std::io::Error, server: &str, max_connections_flag: &str) -> String {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    match e.raw_os_error() {
        Some(EMFILE) => format!(
            "{server} has run out of file descriptors ({}; each connection takes one): \
             raise the limit (LimitNOFILE= in the systemd unit, ulimit -n) above \
             {max_connections_flag} plus 64, or look for a descriptor leak",
            open_files_limit()
        ),
        Some(ENFILE) => {
            "the system has run out of file descriptors (fs.file-max): see what holds them".into()
        }
        _ => "a client's connection failed before it was accepted; retrying".into(),
    }
}

/// The process's open-file limit as `/proc/self/limits` gives it (Linux), or that
/// it is unknown.
pub fn open_files_limit() -> String {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            let soft = line.split_whitespace().nth(3)?;
            Some(format!("limit {soft} open files"))
        })
        .unwrap_or_else(|| "limit unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_table_tells_the_connection_idle_the_longest_to_close() {
        let places = Places::new("test", 2, Gauge::default());
        let first = places.take().await;
        let second = places.take().await;
        second.serving().started();
        let third = places.take();
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending(), "both held");
        // The first has been idle for a second: told to close, and once it has, its
        // place is the third's; the second, serving, is not told.
        let closes = async move {
            first.closing().await;
            drop(first);
        };
        let third = tokio::time::timeout(IDLE_BEFORE_CLOSING * 2, third);
        let ((), third) = tokio::join!(closes, third);
        assert!(third.is_ok(), "the idle connection was not told to close");
        assert_eq!(places.open(), 2);
        assert!(!second.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn while_every_connection_serves_a_new_one_waits_for_a_place() {
        let open = Gauge::default();
        let places = Places::new("test", 1, open.clone());
        let only = places.take().await;
        assert_eq!(open.get(), 1);
        only.serving().started();
        let next = tokio::time::timeout(IDLE_BEFORE_CLOSING * 10, places.take()).await;
        assert!(next.is_err(), "a serving connection was closed for room");
        only.serving().ended();
        let closes = async move {
            only.closing().await;
            drop(only);
        };
        let next = tokio::time::timeout(IDLE_BEFORE_CLOSING * 3, places.take());
        let ((), next) = tokio::join!(closes, next);
        assert!(next.is_ok(), "the idle connection kept its place");
        assert_eq!(open.get(), 1);
    }

    #[test]
    fn running_out_of_file_descriptors_names_the_limit_and_the_fix() {
        let advice = accept_error_advice(
            &std::io::Error::from_raw_os_error(24),
            "spool-relay",
            "--max-connections",
        );
        assert!(advice.contains("LimitNOFILE") && advice.contains("--max-connections"));
        if cfg!(target_os = "linux") {
            assert!(
                advice.contains("open files") && !advice.contains("unknown"),
                "{advice}"
            );
        }
    }
}
