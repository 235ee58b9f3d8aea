//! Simulation speed: simulated seconds per wall-clock second of `sim::world::run` (the
//! turmoil world stepped through the scenario, then wound down; no checks, report or
//! charts, which `timing.json` also leaves out of its `speedup`) for
//! `scenarios/demo.toml` (20 s) and for the first 90 minutes of
//! `scenarios/us-central1.toml` (1 h healthy, then 30 min of window 1; its deploy and
//! crash come later and are left out). Criterion's throughput is in simulated
//! seconds, so its "elem/s" is simulated seconds per second.
//!
//! Beside the slice, its baseline in the same run: `bare_hyper-90m`, the least a
//! request over turmoil can cost. The same turmoil network (tick, latency, seed) for
//! the same 90 simulated minutes at the workload's rate, but nothing of the bench's
//! own: a client host sends `PUT`s (create-if-absent, `x-goog-if-generation-match:
//! 0`) with bodies of the workload's mean size over four keep-alive connections made
//! with hyper's connection API, and a hyper server on a second host reads each body
//! and answers 200 with an `ETag` and no body. No spool, no `object_store` client, no
//! fake Cloud Storage, no disk: turmoil's step, its TCP and hyper.
//!
//! Between the two, the parts the design requires of every simulated request, added
//! one at a time over the same network and pacing, each still without a spool, a
//! producer or a disk:
//! - `object_store_to_bare-90m`: the `object_store` GCS client (built as the
//!   simulation builds it, `sim::connector::gcs_store`) making create-if-absent puts
//!   to the bare server: what the real client costs over hyper's;
//! - `hyper_to_fake-90m`: the bare client's `PUT`s, with `x-goog-if-generation-match:
//!   0` as the client sends them, to the fake Cloud Storage without faults (as a
//!   turmoil host, `sim::hosts::gcs::serve`): what the fake costs over a bare server;
//! - `object_store_to_fake-90m`: both. The slice's cost per request over this one is
//!   what the spool, the producer, the ledger, the simulated disk and the scenario's
//!   faults add.
//! - `object_store_to_faulty_fake-90m`: the same client against the fake with the
//!   slice's fault plan (its windows and seed as the simulation draws them), each
//!   write sent at its own time (open loop, a task each, as the producer sends
//!   them) under the uploader's `put_timeout`, and nothing done with a failure. The
//!   faults cost a client something whatever it does with a failed write (a hang
//!   times out and its connection is dropped, so a later write dials a new one); the
//!   slice's cost per request over this one is what the spool, the producer, the
//!   ledger and the simulated disk add, with the faults' own cost on both sides.
//!
//! Runs on mimalloc, as the `sim` binary does. After the run, the wall time per step
//! and per request is printed beside each figure, and each one's cost per request
//! over the bare loop's.
//!
//! Then the replay's own share is measured again in pairs, which is its budget's
//! figure: [`SHARE_ROUNDS`] rounds, each running the slice and
//! `object_store_to_fake-90m` back to back (which one first alternates), each timed
//! by the CPU the process spent in it. Criterion measures the slice for about two
//! minutes and then each baseline; on a shared machine whose speed moves by a third
//! within half an hour, the ratio of those medians moved from 1.48 to 1.71 between
//! two runs of one binary. A pair's two runs are seconds apart, so the load falls on
//! both alike, and the median of the rounds' ratios is the figure. Each round also
//! runs `object_store_to_faulty_fake-90m`, and the median of the slice's ratios to
//! it is printed beside: the spool's side with the faults' own cost taken out.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::cell::Cell;
use std::time::{Duration, SystemTime};

use benches::{Summary, estimate};
use bytes::Bytes;
use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use sim::scenario::Scenario;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Length of the us-central1 slice.
const SLICE: Duration = Duration::from_secs(90 * 60);

fn demo() -> Scenario {
    let text = benches::scenario_text("demo.toml");
    sim::scenario::parse("demo.toml", &text).unwrap()
}

/// `us-central1.toml` cut to its first 90 minutes ([`benches::us_central1_slice`]).
fn us_central1_slice() -> Scenario {
    let whole = benches::scenario_text("us-central1.toml");
    let whole = sim::scenario::parse("us-central1.toml", &whole).unwrap();
    assert!(
        whole.events.iter().all(|e| e.at >= SLICE),
        "an event in the slice"
    );
    let slice = sim::scenario::parse(
        "us-central1.toml, 90 min",
        &benches::us_central1_slice(SLICE),
    )
    .unwrap();
    assert_eq!(slice.duration, SLICE);
    slice
}

/// Connections of the bare loop, each sending every `CONNECTIONS / rate` seconds: at
/// 50 writes/s one request per 80 ms, longer than the slowest round trip (2 x 15 ms),
/// so no request queues behind another.
const CONNECTIONS: u64 = 4;
const SERVER_PORT: u16 = 80;
const BUCKET: &str = "bucket";

/// What answers the baseline's requests.
#[derive(Clone, Copy)]
enum Server {
    /// hyper's HTTP/1 server, reading each body and answering 200 with an `ETag`
    /// (`object_store` refuses a put answer without one).
    BareHyper,
    /// The fake Cloud Storage without faults, as the simulation serves it.
    Fake,
    /// The fake Cloud Storage with the scenario's faults, as the simulation starts
    /// it (`sim::world`): the windows drawn from the scenario's seed, the fake's own
    /// seed derived from it.
    FaultyFake,
}

/// What sends the baseline's requests.
#[derive(Clone, Copy)]
enum Client {
    /// hyper's HTTP/1 client over `CONNECTIONS` keep-alive connections.
    BareHyper,
    /// The `object_store` GCS client as the simulation builds it, `CONNECTIONS`
    /// tasks sharing its connection pool.
    ObjectStore,
    /// The same client, each write a task of its own started at the workload's
    /// rate whatever the earlier ones are doing, under the uploader's
    /// `put_timeout`; a failed write is dropped.
    ObjectStoreOpenLoop,
}

/// A baseline: `PUT`s at the slice's rate, over its network, from `client` to
/// `server`, with nothing of the spool's. Returns the steps and requests of the run.
fn baseline(scenario: &Scenario, server: Server, client: Client) -> Work {
    let mut sim = sim::world::build_sim(scenario);
    let fake = match server {
        Server::BareHyper => {
            sim.host("server", serve_bare);
            None
        }
        Server::Fake | Server::FaultyFake => {
            let fake = fake(scenario, matches!(server, Server::FaultyFake));
            let served = fake.clone();
            sim.host("server", move || {
                let fake = served.clone();
                async move {
                    sim::hosts::gcs::serve(fake, SERVER_PORT).await?;
                    Ok(())
                }
            });
            Some(fake)
        }
    };
    if let Client::ObjectStoreOpenLoop = client {
        return open_loop(
            sim,
            scenario,
            fake.expect("an open loop writes to the fake"),
        );
    }
    let interval = Duration::from_secs_f64(CONNECTIONS as f64 / scenario.workload.rate);
    let per_connection = (scenario.duration.as_secs_f64() / interval.as_secs_f64()) as u64;
    let body = Bytes::from(vec![0xa5; scenario.workload.size.mean() as usize]);
    sim.client("client", async move {
        let store = match client {
            Client::BareHyper => None,
            Client::ObjectStore => Some(sim::connector::gcs_store(
                &format!("http://server:{SERVER_PORT}"),
                BUCKET,
            )?),
            Client::ObjectStoreOpenLoop => unreachable!("the open loop runs in `open_loop`"),
        };
        let senders = (0..CONNECTIONS).map(|c| {
            let (body, store) = (body.clone(), store.clone());
            async move {
                let mut sender = match store {
                    Some(store) => Sender::ObjectStore(store),
                    None => Sender::connect().await?,
                };
                let start = tokio::time::Instant::now() + interval * c as u32 / CONNECTIONS as u32;
                for i in 0..per_connection {
                    tokio::time::sleep_until(start + interval * i as u32).await;
                    sender.put(&format!("o/{c}/{i:010}"), body.clone()).await?;
                }
                Ok::<_, Box<dyn std::error::Error>>(())
            }
        });
        for result in futures::future::join_all(senders).await {
            result?;
        }
        Ok(())
    });
    Work {
        steps: step_to_end(&mut sim),
        requests: CONNECTIONS * per_connection,
    }
}

/// Steps a baseline's world until its client is done; the steps taken.
fn step_to_end(sim: &mut turmoil::Sim<'static>) -> u64 {
    let mut steps = 0;
    while !sim.step().expect("the baseline runs") {
        steps += 1;
    }
    steps
}

/// The fake Cloud Storage for a baseline: without faults, or with `scenario`'s as
/// `sim::world` starts it.
fn fake(scenario: &Scenario, faulty: bool) -> fake_gcs::FakeGcs {
    let mut config = fake_gcs::FakeGcsConfig {
        buckets: vec![BUCKET.to_string()],
        ..fake_gcs::FakeGcsConfig::default()
    };
    if faulty {
        let mut scenario = scenario.clone();
        scenario.draw_fault_windows();
        config.faults = scenario.faults;
        config.seed = sim::seed::derive_seed(scenario.seed, &[sim::seed::purpose::FAKE]);
    }
    fake_gcs::FakeGcs::new(
        config,
        std::sync::Arc::new(sim::hosts::gcs::TurmoilClock::new()),
    )
    .expect("the fake starts")
}

/// The open-loop client: a write every `1 / rate` seconds, each a task under the
/// uploader's `put_timeout`, its failure dropped. Counts the requests the fake
/// received (a timed-out write is one, as in the slice).
fn open_loop(mut sim: turmoil::Sim<'static>, scenario: &Scenario, fake: fake_gcs::FakeGcs) -> Work {
    let interval = Duration::from_secs_f64(1.0 / scenario.workload.rate);
    let writes = (scenario.duration.as_secs_f64() / interval.as_secs_f64()) as u64;
    let put_timeout = scenario.uploader.put_timeout;
    let body = Bytes::from(vec![0xa5; scenario.workload.size.mean() as usize]);
    sim.client("client", async move {
        let store = sim::connector::gcs_store(&format!("http://server:{SERVER_PORT}"), BUCKET)?;
        let start = tokio::time::Instant::now();
        let mut in_flight = tokio::task::JoinSet::new();
        for i in 0..writes {
            tokio::time::sleep_until(start + interval * i as u32).await;
            while in_flight.try_join_next().is_some() {}
            let mut sender = Sender::ObjectStore(store.clone());
            let body = body.clone();
            in_flight.spawn(async move {
                let name = format!("o/{i:010}");
                let _ = tokio::time::timeout(put_timeout, sender.put(&name, body)).await;
            });
        }
        while in_flight.join_next().await.is_some() {}
        Ok(())
    });
    Work {
        steps: step_to_end(&mut sim),
        requests: fake.stats().requests,
    }
}

/// The bare server's host: hyper on every accepted connection.
async fn serve_bare() -> Result<(), Box<dyn std::error::Error>> {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_PORT)).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let answer = hyper::service::service_fn(
                |request: hyper::Request<hyper::body::Incoming>| async {
                    request.into_body().collect().await?;
                    let mut response = hyper::Response::new(Empty::<Bytes>::new());
                    response.headers_mut().insert(
                        hyper::header::ETAG,
                        hyper::header::HeaderValue::from_static("\"1\""),
                    );
                    Ok::<_, hyper::Error>(response)
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), answer)
                .await;
        });
    }
}

/// One of the baseline's senders.
enum Sender {
    BareHyper(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    ObjectStore(std::sync::Arc<dyn object_store::ObjectStore>),
}

impl Sender {
    /// A keep-alive hyper connection to the server.
    async fn connect() -> Result<Sender, Box<dyn std::error::Error>> {
        let stream = turmoil::net::TcpStream::connect(("server", SERVER_PORT)).await?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(Sender::BareHyper(sender))
    }

    /// Creates `name` with `body`, as the simulation's writes do (create-if-absent).
    async fn put(&mut self, name: &str, body: Bytes) -> Result<(), Box<dyn std::error::Error>> {
        match self {
            Sender::BareHyper(sender) => {
                let request = hyper::Request::put(format!("/{BUCKET}/{name}"))
                    .header(hyper::header::HOST, "server")
                    .header("x-goog-if-generation-match", "0")
                    .body(Full::new(body))?;
                let response = sender.send_request(request).await?;
                assert_eq!(response.status(), 200);
                response.into_body().collect().await?;
            }
            Sender::ObjectStore(store) => {
                let options = object_store::PutOptions {
                    mode: object_store::PutMode::Create,
                    ..object_store::PutOptions::default()
                };
                store.put_opts(&name.into(), body.into(), options).await?;
            }
        }
        Ok(())
    }
}

/// The baselines, from the least a request costs to the parts every simulated request
/// needs.
const BASELINES: [(&str, Server, Client); 5] = [
    ("bare_hyper-90m", Server::BareHyper, Client::BareHyper),
    (
        "object_store_to_bare-90m",
        Server::BareHyper,
        Client::ObjectStore,
    ),
    ("hyper_to_fake-90m", Server::Fake, Client::BareHyper),
    (
        "object_store_to_fake-90m",
        Server::Fake,
        Client::ObjectStore,
    ),
    (
        "object_store_to_faulty_fake-90m",
        Server::FaultyFake,
        Client::ObjectStoreOpenLoop,
    ),
];

/// What one run did, to turn a median into cost per step and per request.
#[derive(Default, Clone, Copy)]
struct Work {
    steps: u64,
    requests: u64,
}

fn simulation(c: &mut Criterion) -> Vec<(&'static str, Work)> {
    let mut group = c.benchmark_group("simulation");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1));
    let mut work = Vec::new();
    // About 0.2 s and 8 s a run on the machine in BENCHMARKS.md: ten runs of each.
    for (label, scenario, measure) in [
        ("demo", demo(), Duration::from_secs(3)),
        (
            "us-central1-90m",
            us_central1_slice(),
            Duration::from_secs(80),
        ),
    ] {
        group.measurement_time(measure);
        group.throughput(Throughput::Elements(scenario.duration.as_secs()));
        let last = Cell::new(Work::default());
        group.bench_function(label, |b| {
            b.iter_batched(
                || scenario.clone(),
                |scenario| {
                    let output = sim::world::run(scenario, sim::world::Options::default())
                        .expect("the scenario runs");
                    last.set(Work {
                        steps: output.steps,
                        requests: output.fake.requests,
                    });
                    output
                },
                BatchSize::PerIteration,
            )
        });
        work.push((label, last.get()));
    }
    let slice = us_central1_slice();
    group.measurement_time(Duration::from_secs(40));
    group.throughput(Throughput::Elements(slice.duration.as_secs()));
    for (label, server, client) in BASELINES {
        let last = Cell::new(Work::default());
        group.bench_function(label, |b| {
            b.iter(|| last.set(baseline(&slice, server, client)))
        });
        work.push((label, last.get()));
    }
    group.finish();
    work
}

fn summary(since: SystemTime, work: &[(&str, Work)]) {
    let mut table = Summary::new("simulation speed", "simulated s per wall s", since);
    for (label, _) in work {
        table = table.row(label, ["simulation", label, ""], None);
    }
    table.print();
    let mut per_request = std::collections::BTreeMap::new();
    for (label, work) in work {
        let Some(e) = estimate(["simulation", label, ""], since) else {
            continue;
        };
        if work.steps == 0 {
            continue;
        }
        let us_per_request = e.median_ns / 1e3 / work.requests.max(1) as f64;
        per_request.insert(*label, us_per_request);
        println!(
            "  {label}: {} steps, {} requests a run; {:.1} us wall per step, {us_per_request:.1} us per request",
            work.steps,
            work.requests,
            e.median_ns / 1e3 / work.steps as f64,
        );
    }
    let Some(&bare) = per_request.get("bare_hyper-90m") else {
        return;
    };
    for (label, us) in &per_request {
        if label.ends_with("-90m") && *label != "bare_hyper-90m" {
            println!(
                "  {label} per request / bare_hyper-90m per request: {:.2}",
                us / bare
            );
        }
    }
    if let (Some(slice), Some(parts)) = (
        per_request.get("us-central1-90m"),
        per_request.get("object_store_to_fake-90m"),
    ) {
        println!(
            "  us-central1-90m per request / object_store_to_fake-90m per request: {:.2} (what the spool, producer, ledger, disk and faults add)",
            slice / parts
        );
    }
    if let (Some(slice), Some(faulty)) = (
        per_request.get("us-central1-90m"),
        per_request.get("object_store_to_faulty_fake-90m"),
    ) {
        println!(
            "  us-central1-90m per request / object_store_to_faulty_fake-90m per request: {:.2} (what the spool, producer, ledger and disk add, the faults' own cost on both sides)",
            slice / faulty
        );
    }
}

/// Rounds of the paired measure of the replay's own share (about 15 s each);
/// `SPOOL_BENCH_SHARE_ROUNDS` sets another number, 0 none.
const SHARE_ROUNDS: usize = 7;

/// The replay's own share, in pairs: the slice's CPU per request over its
/// baseline's, each round's runs back to back. Prints each round and the median of
/// their ratios; and beside it the slice over `object_store_to_faulty_fake-90m`,
/// the same client meeting the same faults without a spool.
fn paired_share(rounds: usize) {
    if rounds == 0 {
        return;
    }
    let slice = us_central1_slice();
    println!(
        "\nthe replay's own share in pairs: {rounds} rounds of us-central1-90m, object_store_to_fake-90m and object_store_to_faulty_fake-90m back to back, CPU per request"
    );
    println!("  round    slice  baseline   ratio  faulty   ratio");
    let (mut ratios, mut net_ratios) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds {
        let (slice_us, baseline_us, faulty_us) = if round % 2 == 0 {
            let slice_us = slice_cpu_per_request(&slice);
            let baseline_us = baseline_cpu_per_request(&slice, Server::Fake, Client::ObjectStore);
            let faulty_us =
                baseline_cpu_per_request(&slice, Server::FaultyFake, Client::ObjectStoreOpenLoop);
            (slice_us, baseline_us, faulty_us)
        } else {
            let faulty_us =
                baseline_cpu_per_request(&slice, Server::FaultyFake, Client::ObjectStoreOpenLoop);
            let baseline_us = baseline_cpu_per_request(&slice, Server::Fake, Client::ObjectStore);
            (slice_cpu_per_request(&slice), baseline_us, faulty_us)
        };
        let (ratio, net_ratio) = (slice_us / baseline_us, slice_us / faulty_us);
        println!(
            "  {round:>5} {slice_us:>6.1}us {baseline_us:>7.1}us {ratio:>7.2} {faulty_us:>5.1}us {net_ratio:>7.2}"
        );
        ratios.push(ratio);
        net_ratios.push(net_ratio);
    }
    println!(
        "  median of {rounds} rounds: us-central1-90m / object_store_to_fake-90m {:.2} (budget <= 1.25)",
        benches::median(&ratios)
    );
    println!(
        "  median of {rounds} rounds: us-central1-90m / object_store_to_faulty_fake-90m {:.2} (what the spool, producer, ledger and disk add; the faults' own cost on both sides)",
        benches::median(&net_ratios)
    );
}

/// One run of the slice, as criterion times it (the scenario cloned before, the
/// world's output dropped after): microseconds of CPU per request.
fn slice_cpu_per_request(slice: &Scenario) -> f64 {
    let scenario = slice.clone();
    let before = benches::process_cpu_ns();
    let output =
        sim::world::run(scenario, sim::world::Options::default()).expect("the scenario runs");
    let cpu = benches::process_cpu_ns() - before;
    cpu.as_secs_f64() * 1e6 / output.fake.requests.max(1) as f64
}

/// One run of a baseline: microseconds of CPU per request.
fn baseline_cpu_per_request(slice: &Scenario, server: Server, client: Client) -> f64 {
    let before = benches::process_cpu_ns();
    let work = baseline(slice, server, client);
    let cpu = benches::process_cpu_ns() - before;
    cpu.as_secs_f64() * 1e6 / work.requests.max(1) as f64
}

fn main() {
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    let work = simulation(&mut criterion);
    criterion.final_summary();
    summary(since, &work);
    let rounds = std::env::var("SPOOL_BENCH_SHARE_ROUNDS")
        .ok()
        .map_or(SHARE_ROUNDS, |n| {
            n.parse()
                .expect("SPOOL_BENCH_SHARE_ROUNDS is a number of rounds")
        });
    paired_share(rounds);
}
