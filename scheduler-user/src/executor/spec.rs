//! Tasks with a spec (descriptor handler SPEC): the executor fetches the spec from the
//! task's client, reads its inputs (from this host's store, or fetched from the owning
//! host's store), runs the named data handler, writes the output to this host's store,
//! and reports the RESULT (status, error text, output reference and small outputs
//! inline) to the client's spec server before the COMPLETE goes out.
//!
//! The connections to spec servers and stores are kept between tasks (one per peer and
//! executor). The output of a handler the program registered is stored only when it is
//! larger than what RESULT carries inline: only the caller reads it, and the caller has
//! it from the RESULT. The data handlers' outputs are always stored, since later tasks
//! of a DAG read them from the store.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler_common::data::{DataFrame, ObjectRef, TaskResult, MAX_INLINE_OUTPUT};
use scheduler_common::{Entry, JobRef, STATUS_FAILED, STATUS_OK, STATUS_REFUSED};

use super::counters::{bump, ExecutorCounters};
use super::handlers::{run_data, DataFailure, DATA_HANDLERS};
use crate::store::client as store_client;
use crate::store::wire::Connections;

/// How long one spec fetch, object transfer or RESULT exchange may wait.
pub const DATA_TIMEOUT: Duration = Duration::from_secs(10);

/// Where this executor's data lives, and which handlers its specs may name.
#[derive(Clone, Debug)]
pub struct DataPath {
    /// This host's object store, as the other hosts reach it (what RESULT names).
    pub store: SocketAddrV4,
    /// This host's node id: inputs naming it are read from `store` (local read).
    pub node: u16,
    /// Handlers the program registered, tried before the data handlers.
    pub handlers: Option<Arc<dyn SpecHandlers>>,
    /// This executor's open connections to spec servers and stores.
    conns: Arc<Connections>,
    /// Raised while the claim of the task running now has been revoked by its client.
    revoked: Arc<AtomicBool>,
}

impl DataPath {
    /// The data path of one executor; `revoked` is its lease keeper's flag.
    pub fn new(
        store: SocketAddrV4,
        node: u16,
        handlers: Option<Arc<dyn SpecHandlers>>,
        revoked: Arc<AtomicBool>,
    ) -> DataPath {
        DataPath { store, node, handlers, conns: Arc::default(), revoked }
    }
}

/// The spec task a registered handler runs.
#[derive(Clone, Copy, Debug)]
pub struct SpecTask<'a> {
    pub spec_id: u64,
    /// The task's (uid, jid).
    pub job: JobRef,
    pub args: &'a [u8],
    /// The spec's input objects, read in its order.
    pub inputs: &'a [&'a [u8]],
    /// Raised when the task's client revoked this executor's claim while it runs
    /// (canceled, timed out, final, or the lease lapsed): the RESULT will be ignored.
    /// Learned from the claim's lease renewals, so within about
    /// `CLAIM_RENEW_INTERVAL_MS` plus a round trip; never raised for a task run without
    /// a claim.
    pub revoked: &'a Arc<AtomicBool>,
}

/// Handlers a program registers for spec tasks (the `bolt` crate's
/// `Executor::builder().handler(...)`), beside the data handlers.
pub trait SpecHandlers: Send + Sync + std::fmt::Debug {
    /// Runs handler `name` on `task`; `None` when this set has no handler of that name.
    fn run(&self, name: &str, task: SpecTask<'_>) -> Option<Result<Vec<u8>, DataFailure>>;
}

/// What running one spec came to.
#[derive(Debug)]
pub struct SpecOutcome {
    pub status: u8,
    pub message: String,
    /// Bytes of the output stored in this host's store (0: none).
    pub output_len: u64,
}

impl SpecOutcome {
    fn refused(message: String) -> SpecOutcome {
        SpecOutcome { status: STATUS_REFUSED, message, output_len: 0 }
    }
    fn failed(message: String) -> SpecOutcome {
        SpecOutcome { status: STATUS_FAILED, message, output_len: 0 }
    }
}

fn add_ns(c: &AtomicU64, since: Instant) {
    c.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

impl DataPath {
    /// Runs spec `spec_id` of `entry`'s client (spec server at its client_ip, `port`) and
    /// reports its RESULT. Never panics on what the network sends.
    pub fn run(&self, entry: &Entry, port: u16, spec_id: u64, counters: &ExecutorCounters) -> SpecOutcome {
        let server = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(entry.client_ip), port));
        let outcome = self.fetch_and_run(server, entry, spec_id, counters);
        let output = outcome.1;
        let outcome = outcome.0;
        // The output travels inline when small (then stored only for a data handler).
        let inline: &[u8] = match &output {
            Some((_, data)) if data.len() <= MAX_INLINE_OUTPUT => data,
            _ => &[],
        };
        let output_ref = output.as_ref().map(|(name, data)| ObjectRef {
            name,
            size: data.len() as u64,
            node: self.node,
            store_ip: self.store.ip().octets(),
            store_port: self.store.port(),
        });
        let mut message = outcome.message.clone();
        truncate_text(&mut message);
        let result = DataFrame::Result(TaskResult {
            spec_id,
            status: outcome.status,
            message: &message,
            output: output_ref,
            inline,
        });
        match self
            .conns
            .call(server, &result, DATA_TIMEOUT)
            .map(|a| matches!(a.frame(), DataFrame::ResultAck { spec_id: s } if s == spec_id))
        {
            Ok(true) => {}
            Ok(false) => {
                bump(&counters.result_errors);
                tracing::warn!(%server, spec_id, "spec server did not acknowledge the RESULT");
            }
            Err(e) => {
                bump(&counters.result_errors);
                tracing::warn!(%server, spec_id, error = %e, "sending RESULT failed");
            }
        }
        outcome
    }

    /// Fetches the spec and the inputs, runs the handler and stores the output (a
    /// registered handler's only when it does not travel inline).
    fn fetch_and_run(
        &self,
        server: SocketAddr,
        entry: &Entry,
        spec_id: u64,
        counters: &ExecutorCounters,
    ) -> (SpecOutcome, Option<(String, Vec<u8>)>) {
        let answer = match self.conns.call(server, &DataFrame::SpecGet { spec_id }, DATA_TIMEOUT) {
            Ok(a) => a,
            Err(e) => {
                bump(&counters.spec_errors);
                return (SpecOutcome::failed(format!("fetching spec {spec_id}: {e:#}")), None);
            }
        };
        bump(&counters.spec_fetches);
        let spec = match answer.frame() {
            DataFrame::Spec(s) if s.spec_id == spec_id => s,
            DataFrame::Error { code, message } => {
                bump(&counters.spec_errors);
                return (SpecOutcome::refused(format!("spec {spec_id}: {} ({message})", code.name())), None);
            }
            other => {
                bump(&counters.spec_errors);
                return (SpecOutcome::refused(format!("spec {spec_id}: answered with {:?}", other.kind())), None);
            }
        };
        let mut inputs: Vec<Vec<u8>> = Vec::with_capacity(spec.inputs.len());
        for input in spec.inputs.iter() {
            match self.read_input(&input, counters) {
                Ok(data) => inputs.push(data),
                Err(message) => return (SpecOutcome::failed(message), None),
            }
        }
        let views: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
        let owner = JobRef::new(entry.uid(), entry.jid());
        let task = SpecTask { spec_id, job: owner, args: spec.args, inputs: &views, revoked: &self.revoked };
        let registered = self.handlers.as_ref().and_then(|h| h.run(spec.handler, task));
        let only_caller_reads = registered.is_some();
        let ran = match registered {
            Some(r) => r,
            None if !DATA_HANDLERS.contains(&spec.handler) => {
                let name = spec.handler;
                Err(DataFailure::Refused(format!(
                    "unknown data handler {name:?} (known: {DATA_HANDLERS:?}), and no handler of that name is registered on this executor"
                )))
            }
            None => run_data(spec.handler, spec.args, &views),
        };
        let output = match ran {
            Ok(o) => o,
            Err(DataFailure::Refused(m)) => return (SpecOutcome::refused(m), None),
            Err(DataFailure::Failed(m)) => return (SpecOutcome::failed(m), None),
        };
        if !(only_caller_reads && output.len() <= MAX_INLINE_OUTPUT) {
            let stored = Instant::now();
            let put = store_client::put_kept(
                &self.conns,
                SocketAddr::V4(self.store),
                owner,
                spec.output,
                &output,
                DATA_TIMEOUT,
            );
            if let Err(e) = put {
                return (SpecOutcome::failed(format!("storing output {}: {e}", spec.output)), None);
            }
            add_ns(&counters.output_write_ns, stored);
            bump(&counters.outputs_stored);
        }
        let len = output.len() as u64;
        (
            SpecOutcome { status: STATUS_OK, message: String::new(), output_len: len },
            Some((spec.output.to_owned(), output)),
        )
    }

    /// Reads one input: from this host's store when this node owns it, else from the
    /// owner's store; each timed into its own counter.
    fn read_input(&self, input: &ObjectRef<'_>, counters: &ExecutorCounters) -> Result<Vec<u8>, String> {
        let local = input.node == self.node;
        let from = if local {
            SocketAddr::V4(self.store)
        } else {
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(input.store_ip), input.store_port))
        };
        let started = Instant::now();
        let data = store_client::get_kept(&self.conns, from, input.name, DATA_TIMEOUT)
            .map_err(|e| format!("input {} (node {}): {e}", input.name, input.node))?;
        if data.len() as u64 != input.size {
            return Err(format!("input {}: {} bytes where the spec says {}", input.name, data.len(), input.size));
        }
        let (n, ns, bytes) = if local {
            (&counters.local_reads, &counters.local_read_ns, &counters.local_read_bytes)
        } else {
            (&counters.remote_fetches, &counters.remote_fetch_ns, &counters.remote_fetch_bytes)
        };
        add_ns(ns, started);
        bump(n);
        bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(data)
    }
}

/// Cuts an error text to what RESULT carries, at a character boundary.
fn truncate_text(s: &mut String) {
    let max = scheduler_common::data::MAX_MESSAGE_TEXT;
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}
