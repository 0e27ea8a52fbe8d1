//! The client's spec server: executors fetch a SPEC task's spec here by id (SPEC_GET →
//! SPEC) and report how it ended (RESULT → RESULT_ACK). It listens on TCP at the client
//! socket's address, so the ENTRY's client_ip plus the descriptor's port reach it.
//! Results carry status, error text and the output's location (and small outputs
//! inline) back to the submitter.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scheduler_common::data::{encode_spec, spec_len, DataError, DataFrame, ErrorCode};
use serde::Serialize;

use crate::store::wire::{write_frame, FrameServer, FrameService};
use crate::store::ObjectLocation;

/// A spec as the client keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecEntry {
    pub handler: String,
    pub args: Vec<u8>,
    /// Name the output is stored under.
    pub output: String,
    pub inputs: Vec<ObjectLocation>,
}

/// How a spec ended, as its executor reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SpecResult {
    pub status: u8,
    pub message: String,
    pub output: Option<ObjectLocation>,
    /// The output's bytes when small enough to travel inline (else empty).
    pub inline: Vec<u8>,
}

/// The spec server's counters.
#[derive(Debug, Default)]
pub struct SpecCounters {
    pub specs_served: AtomicU64,
    pub unknown_specs: AtomicU64,
    pub results: AtomicU64,
    /// Malformed frames, one counter per kind (see [`DataError::NAMES`]).
    pub decode_errors: [AtomicU64; DataError::KINDS],
}

/// Called with each RESULT as it arrives, before it is acknowledged.
pub type ResultHook = Box<dyn Fn(u64, SpecResult) + Send + Sync>;

#[derive(Default)]
struct Shared {
    specs: Mutex<HashMap<u64, SpecEntry>>,
    results: Mutex<HashMap<u64, SpecResult>>,
    counters: SpecCounters,
    /// Where results go instead of `results`, when set.
    on_result: Option<ResultHook>,
}

/// A running spec server.
pub struct SpecServer {
    shared: Arc<Shared>,
    server: FrameServer,
}

/// A connection silent this long is closed.
const IDLE: Duration = Duration::from_secs(30);
/// Executor connections served at once.
const MAX_CONNECTIONS: usize = 1024;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SpecServer {
    /// Listens on `ip` (the client socket's address), a port the kernel picks.
    pub fn spawn(ip: IpAddr) -> anyhow::Result<SpecServer> {
        Self::start(ip, None)
    }

    /// Like [`SpecServer::spawn`], handing every RESULT to `on_result` as it arrives
    /// (so a caller waits on no timer); [`SpecServer::take_result`] then finds none.
    pub fn spawn_with(ip: IpAddr, on_result: ResultHook) -> anyhow::Result<SpecServer> {
        Self::start(ip, Some(on_result))
    }

    fn start(ip: IpAddr, on_result: Option<ResultHook>) -> anyhow::Result<SpecServer> {
        let shared = Arc::new(Shared { on_result, ..Shared::default() });
        let server = FrameServer::spawn(SocketAddr::new(ip, 0), "spec-server", shared.clone(), MAX_CONNECTIONS, IDLE)?;
        Ok(SpecServer { shared, server })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Makes spec `id` fetchable.
    pub fn insert(&self, id: u64, spec: SpecEntry) {
        lock(&self.shared.specs).insert(id, spec);
    }

    /// Forgets spec `id` (its task is final).
    pub fn remove(&self, id: u64) {
        lock(&self.shared.specs).remove(&id);
    }

    /// The latest RESULT reported for spec `id`, taken out.
    pub fn take_result(&self, id: u64) -> Option<SpecResult> {
        lock(&self.shared.results).remove(&id)
    }

    pub fn counters(&self) -> &SpecCounters {
        &self.shared.counters
    }

    /// Malformed frames by kind, for the kinds seen.
    pub fn decode_errors(&self) -> Vec<(&'static str, u64)> {
        let c = &self.shared.counters.decode_errors;
        (0..DataError::KINDS)
            .map(|i| (DataError::NAMES[i], c[i].load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

impl FrameService for Shared {
    fn answer(&self, request: DataFrame<'_>, conn: &mut TcpStream) -> anyhow::Result<()> {
        match request {
            DataFrame::SpecGet { spec_id } => {
                let spec = lock(&self.specs).get(&spec_id).cloned();
                match spec {
                    Some(s) => {
                        let refs = s.inputs.iter().map(|o| o.as_ref());
                        let mut buf = vec![0u8; spec_len(&s.handler, &s.args, &s.output, refs.clone())];
                        let n = encode_spec(&mut buf, spec_id, &s.handler, &s.args, &s.output, refs)
                            .map_err(|e| anyhow::anyhow!("encoding spec {spec_id}: {e}"))?;
                        std::io::Write::write_all(conn, &buf[..n])?;
                        self.counters.specs_served.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    }
                    None => {
                        self.counters.unknown_specs.fetch_add(1, Ordering::Relaxed);
                        let text = format!("no spec {spec_id} (unknown, or its task is final)");
                        write_frame(conn, &DataFrame::Error { code: ErrorCode::UnknownSpec, message: &text })
                    }
                }
            }
            DataFrame::Result(r) => {
                let result = SpecResult {
                    status: r.status,
                    message: r.message.to_owned(),
                    output: r.output.as_ref().map(ObjectLocation::from_ref),
                    inline: r.inline.to_vec(),
                };
                self.counters.results.fetch_add(1, Ordering::Relaxed);
                match &self.on_result {
                    Some(hook) => hook(r.spec_id, result),
                    None => drop(lock(&self.results).insert(r.spec_id, result)),
                }
                write_frame(conn, &DataFrame::ResultAck { spec_id: r.spec_id })
            }
            other => {
                let text = format!("a spec server does not answer {:?} frames", other.kind());
                write_frame(conn, &DataFrame::Error { code: ErrorCode::BadRequest, message: &text })
            }
        }
    }

    fn refused(&self, e: DataError) {
        self.counters.decode_errors[e.index()].fetch_add(1, Ordering::Relaxed);
    }
}
