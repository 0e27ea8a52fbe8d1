//! Executors that run your own handlers: `Executor::builder().handler("name", f)`.
//!
//! The executors are the scheduler's own (`scheduler_user::executor`: pull with
//! GET_TASK, claim, report COMPLETE); this module is the [`SpecRunner`] they hand spec
//! tasks to. For each one it fetches the spec from the task's client, runs the handler
//! the spec names on its input, and sends the RESULT back: the output inline when it is
//! at most [`MAX_INLINE_OUTPUT`] bytes, else written to this host's object store and
//! named in the RESULT.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use scheduler_common::data::{DataFrame, ErrorCode, ObjectRef, TaskResult, MAX_INLINE_OUTPUT, MAX_MESSAGE_TEXT};
use scheduler_common::layout::{JobRef, STATUS_FAILED, STATUS_OK, STATUS_REFUSED};
use scheduler_user::executor::{self, CounterSnapshot, ExecutorConfig, ExecutorPool, Outcome, Refusal, SpecRunner};

use crate::{frames, store};

/// Longest an executor waits on a client's spec server.
const SPEC_TIMEOUT: Duration = Duration::from_secs(10);

/// What a handler gets: its input and which task it is.
#[derive(Clone, Debug)]
pub struct TaskContext {
    /// The bytes the caller submitted.
    pub input: Bytes,
    /// The spec id (unique per client).
    pub spec_id: u64,
    /// The job this task belongs to (the client's uid and job id).
    pub uid: u32,
    pub jid: u32,
}

/// A handler's error as the caller sees it: its message.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

type HandlerFn = dyn Fn(TaskContext) -> Result<Bytes, HandlerError> + Send + Sync;

/// Settings and handlers of a set of executors.
pub struct ExecutorBuilder {
    config: ExecutorConfig,
    handlers: HashMap<String, Arc<HandlerFn>>,
    store: Option<SocketAddr>,
}

impl ExecutorBuilder {
    /// Registers `f` under `name` (what [`crate::Client::submit`] names).
    pub fn handler<F, O, E>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(TaskContext) -> Result<O, E> + Send + Sync + 'static,
        O: Into<Bytes>,
        E: Into<HandlerError>,
    {
        self.handlers.insert(name.to_string(), Arc::new(move |ctx| f(ctx).map(Into::into).map_err(Into::into)));
        self
    }

    /// Executor threads (default 1).
    pub fn executors(mut self, n: u16) -> Self {
        self.config.executors = n;
        self
    }

    /// Node id in GET_TASK and COMPLETE (default 0).
    pub fn node(mut self, node: u16) -> Self {
        self.config.node = node;
        self
    }

    /// The resource bits these executors offer.
    pub fn resources(mut self, r: u8) -> Self {
        self.config.resources = r;
        self
    }

    /// This host's object store: where outputs above [`MAX_INLINE_OUTPUT`] are written.
    /// Without one, a handler's larger output fails its task with a message saying so.
    pub fn store(mut self, addr: SocketAddr) -> Self {
        self.store = Some(addr);
        self
    }

    /// The scheduler's executor settings, for what the builder does not name.
    pub fn config_mut(&mut self) -> &mut ExecutorConfig {
        &mut self.config
    }

    /// Starts the executor threads.
    pub fn spawn(self) -> anyhow::Result<Executor> {
        anyhow::ensure!(!self.handlers.is_empty(), "register at least one handler");
        let runner = Runner { handlers: self.handlers, store: self.store };
        let mut config = self.config;
        config.spec_runner = Some(Arc::new(runner));
        Ok(Executor { pool: executor::spawn(config)? })
    }
}

/// Running executors; dropping them stops them after their running tasks.
pub struct Executor {
    pool: ExecutorPool,
}

impl Executor {
    /// Executors that pull from the switch (or host agent) at `switch`.
    pub fn builder(switch: SocketAddr) -> ExecutorBuilder {
        ExecutorBuilder { config: ExecutorConfig::new(switch, 0), handlers: HashMap::new(), store: None }
    }

    /// Counters of all executors (tasks run, ok, failed, refused, ...).
    pub fn counters(&self) -> CounterSnapshot {
        self.pool.counters()
    }

    /// Stops pulling, finishes the running tasks, joins the threads.
    pub fn shutdown(self) -> CounterSnapshot {
        self.pool.shutdown()
    }
}

struct Runner {
    handlers: HashMap<String, Arc<HandlerFn>>,
    store: Option<SocketAddr>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").field("handlers", &self.handlers.keys().collect::<Vec<_>>()).finish()
    }
}

/// How a handler run ended, before it is reported.
enum Ran {
    Output(Bytes),
    Failed(String),
    Refused(String),
}

impl SpecRunner for Runner {
    fn run(&self, spec_server: SocketAddr, spec_id: u64, node: u16, job: JobRef) -> Outcome {
        match self.run_spec(spec_server, spec_id, node, job) {
            Ok(outcome) => outcome,
            Err(e) => {
                // The client is unreachable or answered nonsense: not run, so the
                // scheduler may try elsewhere.
                tracing::debug!(%spec_server, spec_id, error = %format!("{e:#}"), "spec task not run");
                Outcome::Refused(Refusal::SpecRefused)
            }
        }
    }
}

impl Runner {
    fn run_spec(&self, server: SocketAddr, spec_id: u64, node: u16, job: JobRef) -> anyhow::Result<Outcome> {
        let mut conn = TcpStream::connect_timeout(&server, SPEC_TIMEOUT).context("connecting to the spec server")?;
        conn.set_nodelay(true)?;
        conn.set_read_timeout(Some(SPEC_TIMEOUT))?;
        frames::write_blocking(&mut conn, &DataFrame::SpecGet { spec_id })?;
        let answer = frames::read_blocking(&mut conn)?;
        let ran = match answer.frame() {
            DataFrame::Spec(spec) => {
                let ctx = |input| TaskContext { input, spec_id, uid: job.uid(), jid: job.jid() };
                let input = match spec.inputs.iter().next() {
                    None => Ok(Bytes::copy_from_slice(spec.args)),
                    Some(o) => store::get_blocking(SocketAddr::from((o.store_ip, o.store_port)), o.name)
                        .map_err(|e| format!("fetching input {}: {e:#}", o.name)),
                };
                let ran = match (self.handlers.get(spec.handler), input) {
                    (None, _) => Ran::Refused(format!("no handler named {:?} on this executor", spec.handler)),
                    (Some(_), Err(e)) => Ran::Failed(e),
                    (Some(h), Ok(input)) => self.call(h, ctx(input)),
                };
                (ran, spec.output.to_string())
            }
            // Canceled, timed out or already finished elsewhere: nothing to run.
            DataFrame::Error { code: ErrorCode::UnknownSpec, .. } => return Ok(Outcome::Refused(Refusal::SpecRefused)),
            other => anyhow::bail!("spec server answered SPEC_GET with {:?}", other.kind()),
        };
        let (ran, output_name) = ran;
        let outcome = self.report(&mut conn, spec_id, node, job, ran, &output_name)?;
        Ok(outcome)
    }

    fn call(&self, h: &Arc<HandlerFn>, ctx: TaskContext) -> Ran {
        match catch_unwind(AssertUnwindSafe(|| h(ctx))) {
            Ok(Ok(out)) => Ran::Output(out),
            Ok(Err(e)) => Ran::Failed(e.to_string()),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Ran::Failed(format!("handler panicked: {what}"))
            }
        }
    }

    /// Sends the RESULT and waits for its acknowledgement. Once the client has an output
    /// or a handler's error the task is final: the COMPLETE says OK and the scheduler
    /// does not run it again. A refusal (no such handler here) lets another executor try.
    fn report(
        &self,
        conn: &mut TcpStream,
        spec_id: u64,
        node: u16,
        job: JobRef,
        ran: Ran,
        output_name: &str,
    ) -> anyhow::Result<Outcome> {
        let stored_ip;
        let (status, message, output, inline, outcome) = match &ran {
            Ran::Output(out) if out.is_empty() => (STATUS_OK, String::new(), None, &[][..], Outcome::Ok),
            Ran::Output(out) if out.len() <= MAX_INLINE_OUTPUT => {
                // Inline only: store_port 0 says no store keeps a copy.
                let o = ObjectRef { name: output_name, size: out.len() as u64, node, store_ip: [0; 4], store_port: 0 };
                (STATUS_OK, String::new(), Some(o), &out[..], Outcome::Ok)
            }
            Ran::Output(out) => match self.store {
                Some(addr) => match store::put_blocking(addr, job, output_name, out) {
                    Ok(()) => {
                        stored_ip = match addr.ip() {
                            IpAddr::V4(ip) => ip.octets(),
                            IpAddr::V6(_) => [0; 4],
                        };
                        let o = ObjectRef {
                            name: output_name,
                            size: out.len() as u64,
                            node,
                            store_ip: stored_ip,
                            store_port: addr.port(),
                        };
                        (STATUS_OK, String::new(), Some(o), &[][..], Outcome::Ok)
                    }
                    Err(e) => (STATUS_FAILED, format!("writing the output to the store: {e:#}"), None, &[][..], Outcome::Ok),
                },
                None => (
                    STATUS_FAILED,
                    format!(
                        "output of {} bytes is above the {MAX_INLINE_OUTPUT}-byte inline limit and this executor has no store",
                        out.len()
                    ),
                    None,
                    &[][..],
                    Outcome::Ok,
                ),
            },
            Ran::Failed(msg) => (STATUS_FAILED, msg.clone(), None, &[][..], Outcome::Ok),
            Ran::Refused(msg) => (STATUS_REFUSED, msg.clone(), None, &[][..], Outcome::Refused(Refusal::SpecRefused)),
        };
        let message = truncate(&message, MAX_MESSAGE_TEXT);
        let result = TaskResult { spec_id, status, message, output, inline };
        frames::write_blocking(conn, &DataFrame::Result(result))?;
        let ack = frames::read_blocking(conn)?;
        match ack.frame() {
            DataFrame::ResultAck { spec_id: acked } if acked == spec_id => Ok(outcome),
            other => anyhow::bail!("spec server answered RESULT with {:?}", other.kind()),
        }
    }
}

/// The longest prefix of `s` within `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
