//! The relay as a turmoil host (`[relay] enabled = true`).
//!
//! The host runs the production `spool-relay` ([`relay::Relay`]) the way
//! `relay::cli` does: each boot is a boot of [`super::node`], as an app host's
//! (the spool on the host's own `SimDisk`, the uploader and drainer through the
//! production GCS client to the fake, the sampler), and instead of a producer,
//! [`relay::Connections`] serving every connection accepted on `relay:4443` over
//! turmoil TCP until the world asks the host to stop (then requests in flight
//! finish, for at most `[relay] shutdown_grace`). Reads, lists and deletes pass
//! through to the fake with the same client ([`relay::PassThrough::store`]), and
//! objects still in the spool read back from it. Crashes, restarts, deploys, a
//! power loss at a disk operation and the final inventory are the world's, as for
//! any host with a spool. App hosts write to it with [`super::relay_client`].

use std::sync::Arc;

use relay::{Connections, PassThrough, Relay, RelayConfig};
use tokio::sync::watch;

use super::control::{self, BUCKET, Command, RELAY_PORT, Shared};
use super::node::{Node, SimWallClock};

/// The relay host's software: one boot, from boot delay to graceful stop.
pub async fn run(shared: Arc<Shared>, host: u32) -> turmoil::Result {
    let (boot, mut commands) = control::begin(&shared, host).await;
    let Some(node) = Node::start(&shared, host, boot, &mut commands).await? else {
        return Ok(());
    };
    if node.serving() {
        serve(&shared, &node, &mut commands).await?;
    }
    node.stop(&shared, host, &commands).await;
    Ok(())
}

/// Serves the upload API through `node`'s uploader until the command changes, then
/// stops accepting and lets the requests in flight finish.
async fn serve(
    shared: &Shared,
    node: &Node,
    commands: &mut watch::Receiver<Command>,
) -> std::io::Result<()> {
    let scenario = &shared.scenario;
    let options = scenario
        .relay
        .expect("a relay host runs only in a scenario with [relay]");
    // The largest object the relay takes is its default, the largest the spool
    // holds: a write the spool could never hold is refused (413) as the uploader
    // would refuse it.
    let config = RelayConfig {
        retry_after: options.retry_after,
        pass_through: PassThrough::store(node.store.clone()),
        ..RelayConfig::new(BUCKET)
    };
    let clock = Arc::new(SimWallClock::new(scenario));
    let relay = Relay::new(config, node.uploader.clone(), clock).map_err(std::io::Error::other)?;
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", RELAY_PORT)).await?;
    // The production connection limit and its defaults (max_connections 256).
    let connections = Connections::new(relay);
    loop {
        // A place first, as the relay's accept loop takes one: over the limit a
        // connection waits unaccepted.
        let place = tokio::select! {
            biased;
            _ = commands.changed() => break,
            place = connections.place() => place,
        };
        tokio::select! {
            biased;
            _ = commands.changed() => break,
            accepted = listener.accept() => connections.serve_in(accepted?.0, place),
        }
    }
    drop(listener);
    connections.shutdown(options.shutdown_grace).await;
    Ok(())
}
