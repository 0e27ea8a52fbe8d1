//! The store's TCP service (a [`FrameServer`]) and `bolt object serve`.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use scheduler_common::data::{DataError, DataFrame, ErrorCode, DEFAULT_STORE_PORT};

use super::wire::{write_frame, FrameServer, FrameService};
use super::{ObjectStore, StoreSnapshot};

/// How a store runs.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub listen: SocketAddr,
    /// Bytes of object data kept at most.
    pub capacity: u64,
    /// Largest object accepted.
    pub max_object: u64,
    /// Connections served at once; more are closed at once (counted).
    pub max_connections: usize,
    /// A connection silent this long is closed.
    pub idle_timeout: Duration,
}

impl StoreConfig {
    pub fn new(listen: SocketAddr) -> StoreConfig {
        StoreConfig {
            listen,
            capacity: 1 << 30,
            max_object: scheduler_common::data::MAX_OBJECT_LEN as u64,
            max_connections: 256,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// A running store.
pub struct StoreHandle {
    store: Arc<ObjectStore>,
    server: FrameServer,
}

impl StoreHandle {
    /// The address it listens on (with the port picked when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub fn store(&self) -> &Arc<ObjectStore> {
        &self.store
    }

    pub fn snapshot(&self) -> StoreSnapshot {
        self.store.snapshot()
    }

    /// Stops accepting; open connections end when their peer closes or goes idle.
    pub fn shutdown(mut self) -> StoreSnapshot {
        self.server.stop();
        self.store.snapshot()
    }
}

/// Binds and starts serving.
pub fn spawn(cfg: StoreConfig) -> anyhow::Result<StoreHandle> {
    let store = Arc::new(ObjectStore::new(cfg.capacity, cfg.max_object));
    let server = FrameServer::spawn(cfg.listen, "store", store.clone(), cfg.max_connections, cfg.idle_timeout)?;
    tracing::debug!(addr = %server.addr(), "store listening");
    Ok(StoreHandle { store, server })
}

impl FrameService for ObjectStore {
    fn answer(&self, request: DataFrame<'_>, conn: &mut TcpStream) -> anyhow::Result<()> {
        let refusal_text;
        let data;
        let answer = match request {
            DataFrame::Put { owner, name, data } => match self.put(owner, name, data) {
                Ok(size) => DataFrame::Stored { size },
                Err(r) => {
                    refusal_text = r.to_string();
                    DataFrame::Error { code: r.code(), message: &refusal_text }
                }
            },
            DataFrame::Get { name } => match self.get(name) {
                Ok(d) => {
                    data = d;
                    DataFrame::Object { data: &data }
                }
                Err(r) => {
                    refusal_text = r.to_string();
                    DataFrame::Error { code: r.code(), message: &refusal_text }
                }
            },
            DataFrame::DeleteJob { owner } => {
                let (objects, bytes) = self.delete_job(owner);
                DataFrame::Deleted { objects, bytes }
            }
            other => {
                refusal_text = format!("a store does not answer {:?} frames", other.kind());
                DataFrame::Error { code: ErrorCode::BadRequest, message: &refusal_text }
            }
        };
        write_frame(conn, &answer)
    }

    fn refused(&self, e: DataError) {
        self.counters.decode_errors[e.index()].fetch_add(1, Ordering::Relaxed);
    }

    fn connection_refused(&self) {
        self.counters.connections_refused.fetch_add(1, Ordering::Relaxed);
    }
}

/// Arguments of `bolt object serve`.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Address to serve on: this host's address the other hosts reach it at, and the
    /// port executors and clients are told (`bolt executor --store`).
    #[arg(long, value_name = "ADDR", default_value_t = SocketAddr::from(([0, 0, 0, 0], DEFAULT_STORE_PORT)))]
    pub listen: SocketAddr,

    /// Memory for object data, in MiB; a PUT beyond it is refused (FULL).
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub capacity_mib: u64,

    /// Largest object accepted, in MiB (at most 64).
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_object_mib: u64,

    /// Connections served at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_connections: usize,

    /// Log the counters every this many seconds while they change (0: only at exit).
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub stats_interval_s: u64,
}

/// Runs `bolt object serve` until SIGINT or SIGTERM.
pub fn run(args: StoreArgs) -> anyhow::Result<()> {
    let cfg = StoreConfig {
        capacity: args.capacity_mib << 20,
        max_object: args.max_object_mib << 20,
        max_connections: args.max_connections,
        ..StoreConfig::new(args.listen)
    };
    let handle = spawn(cfg)?;
    tracing::info!(listen = %handle.addr(), capacity_mib = args.capacity_mib, "object store serving");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut ticker = tokio::time::interval(Duration::from_secs(args.stats_interval_s.max(1)));
        ticker.tick().await;
        let mut last = StoreSnapshot::default();
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => return r.map_err(anyhow::Error::from),
                _ = term.recv() => return Ok(()),
                _ = ticker.tick(), if args.stats_interval_s > 0 => {
                    let now = handle.snapshot();
                    if now != last {
                        tracing::info!(counters = %serde_json::to_string(&now)?, "store counters");
                        last = now;
                    }
                }
            }
        }
    })?;
    let end = handle.shutdown();
    tracing::info!(counters = %serde_json::to_string(&end)?, "store stopped");
    Ok(())
}
