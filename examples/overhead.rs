//! Per-task overhead of the front door on loopback: a Rust handler that does nothing,
//! submitted through the `bolt` API, against the built-in `noop` descriptor submitted
//! with the scheduler's own client; same software switch, same executors.
//!
//!     cargo run --release -p bolt --example overhead -- [TASKS]
//!
//! Latency: one task at a time, submit to result (p50, p99). Throughput: TASKS tasks
//! as one job (a `map`, or one SUBMIT stream of noops), first submit to last result.

use std::time::{Duration, Instant};

use bolt::{Client, Executor};
use scheduler_common::descriptor::Handler;
use scheduler_user::client::{Client as SchedulerClient, ClientConfig, TaskSpec};
use scheduler_user::store::{self, StoreConfig};
use scheduler_user::switch::{self, SwitchConfig};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, mut lat: Vec<Duration>, n: usize, elapsed: Duration) {
    lat.sort();
    println!(
        "{name:<28} p50 {:>7.1} us  p99 {:>7.1} us  throughput {:>8.0} tasks/s",
        percentile(&lat, 0.5).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6,
        n as f64 / elapsed.as_secs_f64()
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let switch = switch::spawn(SwitchConfig {
        listen: "127.0.0.1:0".parse()?,
        queue_capacity: (n as u32).next_power_of_two().max(1024),
        ..SwitchConfig::default()
    })?;
    let store = store::spawn(StoreConfig::new("127.0.0.1:0".parse()?))?;
    let executors = Executor::builder(switch.local_addr())
        .executors(2)
        .handler("nothing", |_| Ok::<_, String>(bolt::Bytes::new()))
        .spawn(store.addr())?;
    let deadline = Duration::from_secs(60);

    // The built-in noop through the scheduler's client (no spec, no RESULT).
    let mut noop = SchedulerClient::bind(ClientConfig::new(switch.local_addr())).await?;
    let task = TaskSpec::new(Handler::Noop, 1, 0)?;
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        noop.submit(&[task]).await?;
        anyhow::ensure!(noop.wait_idle(Instant::now() + deadline).await?, "a noop did not finish");
        lat.push(t.elapsed());
    }
    let t = Instant::now();
    noop.submit(&vec![task; n]).await?;
    anyhow::ensure!(noop.wait_idle(Instant::now() + deadline).await?, "the noop job did not finish");
    report("built-in noop (descriptor)", lat, n, t.elapsed());

    // A Rust handler through the bolt API (spec fetch, RESULT, claim).
    let client = Client::connect(switch.local_addr()).await?;
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client.submit("nothing", bolt::Bytes::new()).await?;
        lat.push(t.elapsed());
    }
    let t = Instant::now();
    let outputs = client.map_ordered("nothing", vec![bolt::Bytes::new(); n]).await?;
    anyhow::ensure!(outputs.len() == n);
    report("Rust handler (bolt API)", lat, n, t.elapsed());
    executors.shutdown();
    Ok(())
}
