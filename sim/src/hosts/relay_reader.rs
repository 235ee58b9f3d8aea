//! An app host's reads, lists and deletes through the relay, between its writes
//! (`[relay] reads_per_write`, `lists_per_write`, `deletes_per_write`): each a
//! task beside the writes, recording what came back in the `Recorder` for the
//! checker (`checker/reads.rs`). They draw from their own random stream, so turning
//! them on changes no write.
//!
//! - A read `GET`s one of the host's last 100 writes.
//! - A list lists everything under the host's prefix (`h0/`), every page.
//! - A delete `DELETE`s one of the host's last 100 writes whose caller was told
//!   `stored` or `spooled` and that this boot has not deleted yet.

use std::collections::BTreeSet;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::task::JoinSet;

use super::control::{Shared, now};
use super::relay_client::RelayClient;
use crate::recorder::{RelayDelete, RelayList, RelayRead};
use crate::seed::{derive_seed, purpose};
use crate::workload::Shape;

/// Reads and deletes go to one of the host's last this many writes.
const WINDOW: u64 = 100;

/// One boot's reads, lists and deletes through the relay.
pub(crate) struct RelayReader {
    shared: Arc<Shared>,
    client: RelayClient,
    host: u32,
    rng: ChaCha8Rng,
    reads_per_write: f64,
    lists_per_write: f64,
    deletes_per_write: f64,
    deleted: BTreeSet<u64>,
}

impl RelayReader {
    /// `None` unless the scenario asks for reads, lists or deletes through the
    /// relay.
    pub(crate) fn of(
        shared: &Arc<Shared>,
        host: u32,
        boot: u16,
        client: &RelayClient,
    ) -> Option<Self> {
        let options = shared.scenario.relay.filter(|o| o.reads_through())?;
        let seed = derive_seed(
            shared.scenario.seed,
            &[purpose::RELAY_READS, host.into(), boot.into()],
        );
        Some(Self {
            shared: shared.clone(),
            client: client.clone(),
            host,
            rng: ChaCha8Rng::seed_from_u64(seed),
            reads_per_write: options.reads_per_write,
            lists_per_write: options.lists_per_write,
            deletes_per_write: options.deletes_per_write,
            deleted: BTreeSet::new(),
        })
    }

    /// After write `seq`: this arrival's reads, lists and deletes, each its own
    /// task in `in_flight`.
    pub(crate) fn issue(&mut self, shape: &Shape, seq: u64, in_flight: &mut JoinSet<()>) {
        for _ in 0..draw_count(&mut self.rng, self.reads_per_write) {
            if seq == 0 {
                break;
            }
            let read = self.rng.random_range(seq.saturating_sub(WINDOW)..seq);
            self.read(shape, read, in_flight);
        }
        for _ in 0..draw_count(&mut self.rng, self.lists_per_write) {
            self.list(in_flight);
        }
        for _ in 0..draw_count(&mut self.rng, self.deletes_per_write) {
            if let Some(doomed) = self.pick_acknowledged(seq) {
                self.delete(shape, doomed, in_flight);
            }
        }
    }

    fn read(&self, shape: &Shape, seq: u64, in_flight: &mut JoinSet<()>) {
        let name = self.name(shape, seq);
        let (client, shared, host) = (self.client.clone(), self.shared.clone(), self.host);
        in_flight.spawn(async move {
            let issued_ms = ms_now();
            let answer = client.read(&name).await;
            let answered_ms = ms_now();
            let read = RelayRead {
                host,
                seq,
                issued_ms,
                answered_ms,
                answer,
            };
            shared.recorder().relay_reads.push(read);
        });
    }

    fn list(&self, in_flight: &mut JoinSet<()>) {
        let (client, shared, host) = (self.client.clone(), self.shared.clone(), self.host);
        in_flight.spawn(async move {
            let prefix = format!("h{host}");
            let issued_ms = ms_now();
            let names = client.list(&prefix).await;
            let answered_ms = ms_now();
            let list = RelayList {
                host,
                prefix,
                issued_ms,
                answered_ms,
                names,
            };
            shared.recorder().relay_lists.push(list);
        });
    }

    fn delete(&mut self, shape: &Shape, seq: u64, in_flight: &mut JoinSet<()>) {
        self.deleted.insert(seq);
        let name = self.name(shape, seq);
        let (client, shared, host) = (self.client.clone(), self.shared.clone(), self.host);
        in_flight.spawn(async move {
            let issued_ms = ms_now();
            let answer = client.delete(&name).await;
            let answered_ms = ms_now();
            let delete = RelayDelete {
                host,
                seq,
                issued_ms,
                answered_ms,
                answer,
            };
            shared.recorder().relay_deletes.push(delete);
        });
    }

    /// One of the writes before `seq` (within [`WINDOW`]) whose caller was told
    /// `stored` or `spooled` and that this boot has not deleted: the first such
    /// from a random point, or `None`.
    fn pick_acknowledged(&mut self, seq: u64) -> Option<u64> {
        let from = seq.saturating_sub(WINDOW);
        if from == seq {
            return None;
        }
        let start = self.rng.random_range(from..seq);
        let ledger = self.shared.ledger();
        (start..seq).chain(from..start).find(|candidate| {
            !self.deleted.contains(candidate)
                && (ledger.get(self.host, *candidate)).is_some_and(|w| w.told.acknowledged())
        })
    }

    fn name(&self, shape: &Shape, seq: u64) -> String {
        let ledger = self.shared.ledger();
        let poison = ledger.get(self.host, seq).is_some_and(|w| w.poison);
        shape.name(self.host, seq, poison)
    }
}

fn ms_now() -> u32 {
    now().as_millis() as u32
}

/// How many of something at `per_write` on average happen at one write: its whole
/// part, and one more with its fraction's probability.
fn draw_count(rng: &mut ChaCha8Rng, per_write: f64) -> u32 {
    let whole = per_write.trunc();
    let more = rng.random_bool(per_write - whole);
    whole as u32 + u32::from(more)
}
