//! Executors that run your own handlers: `Executor::builder(switch).handler("name", f)`.
//!
//! The executors are the scheduler's own (`scheduler_user::executor`: pull with
//! GET_TASK, claim, fetch the spec, read inputs, store the output, send RESULT and
//! COMPLETE); this module registers the handlers their specs may name.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use scheduler_user::executor::spec::{SpecHandlers, SpecTask};
use scheduler_user::executor::{self, CounterSnapshot, DataFailure, ExecutorConfig, ExecutorPool};

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
    revoked: Arc<AtomicBool>,
}

impl TaskContext {
    /// True once the caller no longer waits for this run's output: the task was
    /// canceled or timed out, or this executor's claim lapsed and the task may run
    /// elsewhere. A handler is never interrupted; one that polls this can stop early,
    /// and whatever it returns then is dropped by the client. The executor learns it
    /// from its claim's lease renewals (every 250 ms while a task runs), so it turns
    /// true within about 250 ms of the cancel plus a round trip. Meaningful while the
    /// handler runs.
    pub fn cancelled(&self) -> bool {
        self.revoked.load(Ordering::Relaxed)
    }
}

/// A handler's error as the caller sees it: its message.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

type HandlerFn = dyn Fn(TaskContext) -> Result<Bytes, HandlerError> + Send + Sync;

/// Settings and handlers of a set of executors.
pub struct ExecutorBuilder {
    config: ExecutorConfig,
    handlers: HashMap<String, Arc<HandlerFn>>,
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

    /// Node id in GET_TASK, COMPLETE and the output references (default 0).
    pub fn node(mut self, node: u16) -> Self {
        self.config.node = node;
        self
    }

    /// The resource bits these executors offer.
    pub fn resources(mut self, r: u8) -> Self {
        self.config.resources = r;
        self
    }

    /// The scheduler's executor settings, for what the builder does not name.
    pub fn config_mut(&mut self) -> &mut ExecutorConfig {
        &mut self.config
    }

    /// Starts the executor threads. `store` is this host's object store, as other hosts
    /// reach it: outputs are written there (small ones also travel inline).
    pub fn spawn(self, store: SocketAddr) -> anyhow::Result<Executor> {
        anyhow::ensure!(!self.handlers.is_empty(), "register at least one handler");
        let SocketAddr::V4(store) = store else { anyhow::bail!("object stores are reached over IPv4") };
        let mut config = self.config;
        config.store = Some(store);
        config.spec_handlers = Some(Arc::new(Registered { handlers: self.handlers }));
        Ok(Executor { pool: executor::spawn(config)?, store })
    }
}

/// Running executors; dropping them stops them after their running tasks.
pub struct Executor {
    pool: ExecutorPool,
    store: SocketAddrV4,
}

impl Executor {
    /// Executors that pull from the switch (or host agent) at `switch`.
    pub fn builder(switch: SocketAddr) -> ExecutorBuilder {
        ExecutorBuilder { config: ExecutorConfig::new(switch, 0), handlers: HashMap::new() }
    }

    /// The object store the outputs go to.
    pub fn store(&self) -> SocketAddrV4 {
        self.store
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

struct Registered {
    handlers: HashMap<String, Arc<HandlerFn>>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered").field("handlers", &self.handlers.keys().collect::<Vec<_>>()).finish()
    }
}

impl SpecHandlers for Registered {
    fn run(&self, name: &str, task: SpecTask<'_>) -> Option<Result<Vec<u8>, DataFailure>> {
        let h = self.handlers.get(name)?;
        // The input travels in the spec's arguments, or as its one input object.
        let input = match task.inputs {
            [] => Bytes::copy_from_slice(task.args),
            [one] if task.args.is_empty() => Bytes::copy_from_slice(one),
            _ => {
                let msg = format!("{name}: a task takes one input, the spec names {}", task.inputs.len());
                return Some(Err(DataFailure::Refused(msg)));
            }
        };
        let ctx = TaskContext {
            input,
            spec_id: task.spec_id,
            uid: task.job.uid(),
            jid: task.job.jid(),
            revoked: task.revoked.clone(),
        };
        Some(match catch_unwind(AssertUnwindSafe(|| h(ctx))) {
            Ok(Ok(out)) => Ok(out.to_vec()),
            Ok(Err(e)) => Err(DataFailure::Failed(e.to_string())),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Err(DataFailure::Failed(format!("handler panicked: {what}")))
            }
        })
    }
}
