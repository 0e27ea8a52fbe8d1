//! The client handle: submit tasks by handler name and await their outputs.
//!
//! A [`Client`] is a cheap, cloneable handle onto one background task that owns the
//! scheduler client (one UDP socket and its `Tracker`: windows, resends on timeout,
//! claims) and onto the client's spec server (`scheduler_user::client::spec_server`),
//! from which executors fetch each task's spec and to which they send its RESULT. A
//! task's future resolves when its RESULT arrives: the spec server hands it over
//! directly, so no timer sits between a result and its caller.
//!
//! What the client puts in a store goes when it is no longer needed: a task's large
//! input when the task is final, a job's large outputs (owned by the job in the
//! executors' stores) once the job is final, by then fetched (a RESULT with a stored
//! output is acknowledged only after the output is in the caller's hands, so the job's
//! COMPLETEs come after). Both with DELETE_JOB, as `bolt dag` collects its garbage.

use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use scheduler_common::descriptor::Handler;
use scheduler_common::layout::{JobRef, STATUS_FAILED, STATUS_OK, STATUS_REFUSED};
use scheduler_user::client::dag_run::collect_garbage;
use scheduler_user::client::spec_server::{SpecEntry, SpecResult, SpecServer};
use scheduler_user::client::{Client as SchedulerClient, ClientConfig, TaskSpec};
use scheduler_user::store::{client as store_client, ObjectLocation};
use tokio::sync::{mpsc, oneshot};

use crate::error::TaskError;

/// Longest a store request may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// Inputs up to this size travel in the spec; larger ones go through the object store
/// (when the client has one, [`ClientBuilder::store`]).
pub const INLINE_INPUT_MAX: usize = 64 * 1024;

/// How often the background task looks for tasks the scheduler gave up on. Results and
/// submissions never wait for it: both wake the task at once.
const GIVE_UP_CHECK: Duration = Duration::from_millis(20);

/// Owner job ids of the large inputs: this bit and the spec id's low 31 bits, one owner
/// per task, apart from the scheduler's job ids (counted up from 1), which own outputs.
const INPUT_OWNER_BIT: u32 = 1 << 31;

fn input_owner(uid: u32, spec: u64) -> JobRef {
    JobRef::new(uid, INPUT_OWNER_BIT | (spec as u32 & !INPUT_OWNER_BIT))
}

/// Settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    switch: SocketAddr,
    uid: u32,
    attempt_timeout: Duration,
    max_attempts: u8,
    timeout: Option<Duration>,
    priority: u8,
    resources: u8,
    store: Option<SocketAddr>,
}

impl ClientBuilder {
    /// The user id carried in every SUBMIT (default: derived from the process id and
    /// the clock, so two clients on one host differ).
    pub fn uid(mut self, uid: u32) -> Self {
        self.uid = uid;
        self
    }

    /// How long an attempt may go unanswered (no claim, no COMPLETE) before the task is
    /// sent again; a claimed task holds as long as its executor renews the lease.
    pub fn attempt_timeout(mut self, d: Duration) -> Self {
        self.attempt_timeout = d;
        self
    }

    /// Attempts per task before it is [`TaskError::Lost`].
    pub fn max_attempts(mut self, n: u8) -> Self {
        self.max_attempts = n;
        self
    }

    /// Default timeout of every task ([`TaskError::Timeout`]); none by default.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Priority of the tasks (1 = highest).
    pub fn priority(mut self, p: u8) -> Self {
        self.priority = p;
        self
    }

    /// Resource bits the tasks need (executors offering all of them run them).
    pub fn resources(mut self, r: u8) -> Self {
        self.resources = r;
        self
    }

    /// This host's object store, where inputs above [`INLINE_INPUT_MAX`] are put.
    pub fn store(mut self, addr: SocketAddr) -> Self {
        self.store = Some(addr);
        self
    }

    /// Binds the sockets and starts the background task (inside a tokio runtime).
    pub async fn connect(self) -> anyhow::Result<Client> {
        let mut cfg = ClientConfig::new(self.switch);
        cfg.tracker.uid = self.uid;
        cfg.tracker.task_timeout = self.attempt_timeout;
        cfg.tracker.max_attempts = self.max_attempts;
        cfg.tracker.claim_lease = cfg.tracker.claim_lease.max(self.attempt_timeout);
        let store = match self.store {
            Some(SocketAddr::V4(a)) => Some(a),
            Some(SocketAddr::V6(_)) => anyhow::bail!("object stores are reached over IPv4"),
            None => None,
        };
        let scheduler = SchedulerClient::bind(cfg).await?;
        let runtime = tokio::runtime::Handle::current();
        // Executors reach the spec server at the address the switch records for the
        // SUBMIT (the UDP socket's IP) and the port in the descriptor.
        let ip = scheduler.local_addr()?.ip();
        let (cmds, rx) = mpsc::unbounded_channel();
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared>| {
            let weak = weak.clone();
            let hook = Box::new(move |spec, r| on_result(&weak, spec, r));
            let server = SpecServer::spawn_with(ip, hook);
            Shared {
                specs: Mutex::new(HashMap::new()),
                output_stores: Mutex::new(HashMap::new()),
                runtime,
                next_spec: AtomicU64::new(1),
                cmds,
                server,
                uid: self.uid,
                store,
                settings: self.clone(),
            }
        });
        if let Err(e) = &shared.server {
            anyhow::bail!("starting the spec server: {e:#}");
        }
        tokio::spawn(drive(scheduler, rx, Arc::downgrade(&shared)));
        Ok(Client { shared })
    }
}

/// Where a task's outcome goes.
enum Reply {
    One(oneshot::Sender<Result<Bytes, TaskError>>),
    Job { index: usize, tx: mpsc::UnboundedSender<(usize, Result<Bytes, TaskError>)> },
}

impl Reply {
    fn send(self, r: Result<Bytes, TaskError>) {
        // A caller that dropped its future or stream no longer wants the outcome.
        match self {
            Reply::One(tx) => drop(tx.send(r)),
            Reply::Job { index, tx } => drop(tx.send((index, r))),
        }
    }
}

/// A task waiting for its RESULT: what its spec says and who wants the outcome.
struct Pending {
    handler: Arc<str>,
    input: Input,
    reply: Reply,
    /// Why the last executor that fetched it would not run it, if one would not.
    refused: Option<String>,
}

enum Input {
    Inline(Bytes),
    Stored(ObjectLocation),
}

enum Command {
    Submit {
        specs: Vec<u64>,
        tasks: Vec<TaskSpec>,
    },
    /// These specs were canceled; cancel their job if none of it is left.
    Canceled {
        specs: Vec<u64>,
    },
}

struct Shared {
    specs: Mutex<HashMap<u64, Pending>>,
    /// The store holding each task's output, when it did not travel inline: deleted
    /// there when the task's job is final.
    output_stores: Mutex<HashMap<u64, SocketAddrV4>>,
    /// Where blocking store calls run.
    runtime: tokio::runtime::Handle,
    next_spec: AtomicU64,
    cmds: mpsc::UnboundedSender<Command>,
    /// Checked right after start: `connect` fails when it is an error.
    server: anyhow::Result<SpecServer>,
    uid: u32,
    store: Option<SocketAddrV4>,
    settings: ClientBuilder,
}

impl Shared {
    fn server(&self) -> &SpecServer {
        self.server.as_ref().expect("connect returned only with a running spec server")
    }

    /// Makes spec `spec` fetchable by executors.
    fn publish(&self, spec: u64) {
        let table = self.specs.lock().expect("spec table");
        let Some(p) = table.get(&spec) else { return };
        let (args, inputs) = match &p.input {
            Input::Inline(b) => (b.to_vec(), Vec::new()),
            Input::Stored(o) => (Vec::new(), vec![o.clone()]),
        };
        let output = format!("out/u{}/s{spec}", self.uid);
        self.server().insert(spec, SpecEntry { handler: p.handler.to_string(), args, output, inputs });
    }

    /// Withdraws spec `spec` (no executor fetches it again) and returns who waits for it;
    /// the task is final, so its input leaves the store.
    fn take(&self, spec: u64) -> Option<Pending> {
        if let Ok(server) = &self.server {
            server.remove(spec);
        }
        let pending = self.specs.lock().expect("spec table").remove(&spec)?;
        if let Input::Stored(o) = &pending.input {
            self.collect_garbage(vec![input_owner(self.uid, spec)], vec![o.store]);
        }
        Some(pending)
    }

    /// Deletes the objects of `owners` from `stores`, off the async threads; failures
    /// are logged (`bolt object gc` removes what is left).
    fn collect_garbage(&self, owners: Vec<JobRef>, stores: Vec<SocketAddrV4>) {
        self.runtime.spawn_blocking(move || {
            let (objects, bytes, errors) = collect_garbage(&owners, &stores);
            tracing::debug!(objects, bytes, "deleted a finished task's objects");
            for e in errors {
                tracing::warn!(error = %e, "deleting a finished task's objects");
            }
        });
    }

    /// Delivers the task's outcome, if it has none yet.
    fn finish(&self, spec: u64, r: Result<Bytes, TaskError>) {
        if let Some(p) = self.take(spec) {
            p.reply.send(r);
        }
    }

    fn cancel(&self, specs: Vec<u64>, why: TaskError) {
        for &s in &specs {
            self.finish(s, Err(why.clone()));
        }
        let _ = self.cmds.send(Command::Canceled { specs });
    }

    fn task_spec(&self, spec_id: u64) -> TaskSpec {
        let handler = Handler::Spec { port: self.server().addr().port(), spec_id };
        let mut t = TaskSpec::new(handler, self.settings.priority, self.settings.resources)
            .expect("a SPEC descriptor with a bound port and a checked priority encodes");
        // Claimed before it runs: a task whose executor dies is resent when its lease
        // lapses, and a duplicate delivery never runs twice.
        t.exactly_once = true;
        t
    }
}

/// A handle onto a connected client; clones share it. The background task stops when
/// the last handle is dropped.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl Client {
    /// Settings for a client of the switch (or host agent) at `switch`.
    pub fn builder(switch: SocketAddr) -> ClientBuilder {
        let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let uid = std::process::id().rotate_left(16) ^ clock.subsec_nanos() ^ clock.as_secs() as u32;
        ClientBuilder {
            switch,
            uid: uid.max(1),
            attempt_timeout: Duration::from_secs(2),
            max_attempts: 3,
            timeout: None,
            priority: 1,
            resources: 0,
            store: None,
        }
    }

    /// A client with the default settings.
    pub async fn connect(switch: SocketAddr) -> anyhow::Result<Client> {
        Client::builder(switch).connect().await
    }

    /// The user id in this client's SUBMITs.
    pub fn uid(&self) -> u32 {
        self.shared.uid
    }

    fn register(&self, handler: &Arc<str>, input: Bytes, reply: Reply) -> u64 {
        let spec = self.shared.next_spec.fetch_add(1, Ordering::Relaxed);
        let pending = Pending { handler: handler.clone(), input: Input::Inline(input), reply, refused: None };
        self.shared.specs.lock().expect("spec table").insert(spec, pending);
        spec
    }

    /// Moves large inputs to the store, then submits `specs` as one job.
    fn launch(&self, specs: Vec<u64>) {
        let shared = self.shared.clone();
        let large: Vec<(u64, Bytes)> = {
            let table = shared.specs.lock().expect("spec table");
            specs
                .iter()
                .filter_map(|s| match &table.get(s)?.input {
                    Input::Inline(b) if b.len() > INLINE_INPUT_MAX => Some((*s, b.clone())),
                    _ => None,
                })
                .collect()
        };
        let submit = move |shared: Arc<Shared>, specs: Vec<u64>| {
            for &s in &specs {
                shared.publish(s);
            }
            let tasks = specs.iter().map(|&s| shared.task_spec(s)).collect();
            let _ = shared.cmds.send(Command::Submit { specs, tasks });
        };
        let Some(store) = shared.store.filter(|_| !large.is_empty()) else {
            submit(shared, specs);
            return;
        };
        tokio::task::spawn_blocking(move || {
            for (spec, input) in large {
                let name = format!("in/u{}/s{spec}", shared.uid);
                // Owned by the task alone: deleted when the task is final.
                let owner = input_owner(shared.uid, spec);
                match store_client::put(SocketAddr::V4(store), owner, &name, &input, STORE_TIMEOUT) {
                    Ok(_) => {
                        let mut table = shared.specs.lock().expect("spec table");
                        match table.get_mut(&spec) {
                            Some(p) => {
                                let size = input.len() as u64;
                                p.input = Input::Stored(ObjectLocation { name, size, node: 0, store });
                            }
                            // Final (canceled) while its input was being put.
                            None => shared.collect_garbage(vec![owner], vec![store]),
                        }
                    }
                    Err(e) => {
                        shared.finish(spec, Err(TaskError::Client(format!("putting the input in the store: {e}"))));
                    }
                }
            }
            submit(shared, specs);
        });
    }

    /// Runs handler `handler` on `input` on some executor; the future resolves to its
    /// output. Dropping the future does not cancel the task; [`TaskFuture::cancel`] does.
    pub fn submit(&self, handler: &str, input: impl Into<Bytes>) -> TaskFuture {
        let (tx, rx) = oneshot::channel();
        let spec = self.register(&Arc::from(handler), input.into(), Reply::One(tx));
        self.launch(vec![spec]);
        let deadline = self.shared.settings.timeout.map(|d| Box::pin(tokio::time::sleep(d)));
        TaskFuture { rx, spec, shared: self.shared.clone(), deadline }
    }

    /// Runs `handler` on every input, as one job; the stream yields `(index, output)`
    /// in the order results arrive. Dropping the stream cancels what has not finished.
    pub fn map<I, B>(&self, handler: &str, inputs: I) -> JobStream
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler: Arc<str> = Arc::from(handler);
        let specs: Vec<u64> = inputs
            .into_iter()
            .enumerate()
            .map(|(index, b)| self.register(&handler, b.into(), Reply::Job { index, tx: tx.clone() }))
            .collect();
        let total = specs.len();
        self.launch(specs.clone());
        let deadline = self.shared.settings.timeout.map(|d| Box::pin(tokio::time::sleep(d)));
        JobStream { rx, specs, shared: self.shared.clone(), remaining: total, deadline }
    }

    /// Like [`Client::map`], collected in input order (the first error ends it).
    pub async fn map_ordered<I, B>(&self, handler: &str, inputs: I) -> Result<Vec<Bytes>, TaskError>
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        let mut stream = self.map(handler, inputs);
        let mut out = vec![Bytes::new(); stream.remaining];
        while let Some((i, r)) = stream.next().await {
            out[i] = r?;
        }
        Ok(out)
    }
}

/// The output of one task, to await. See [`Client::submit`].
pub struct TaskFuture {
    rx: oneshot::Receiver<Result<Bytes, TaskError>>,
    spec: u64,
    shared: Arc<Shared>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TaskFuture {
    /// Fails the task with [`TaskError::Timeout`] (and cancels it) if no result came
    /// within `d` from now.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.deadline = Some(Box::pin(tokio::time::sleep(d)));
        self
    }

    /// Cancels the task: the future resolves to [`TaskError::Canceled`]; an executor
    /// that has not fetched its spec yet never runs it.
    pub fn cancel(&self) {
        self.shared.cancel(vec![self.spec], TaskError::Canceled);
    }

    /// A handle that cancels this task from elsewhere.
    pub fn canceler(&self) -> Canceler {
        Canceler { spec: self.spec, shared: self.shared.clone() }
    }
}

/// Cancels one task (see [`TaskFuture::canceler`]).
#[derive(Clone)]
pub struct Canceler {
    spec: u64,
    shared: Arc<Shared>,
}

impl Canceler {
    pub fn cancel(&self) {
        self.shared.cancel(vec![self.spec], TaskError::Canceled);
    }
}

impl Future for TaskFuture {
    type Output = Result<Bytes, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(r) = Pin::new(&mut self.rx).poll(cx) {
            return Poll::Ready(r.unwrap_or_else(|_| Err(TaskError::Client("the client stopped".into()))));
        }
        if let Some(d) = self.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                self.shared.cancel(vec![self.spec], TaskError::Timeout);
                return Poll::Ready(Err(TaskError::Timeout));
            }
        }
        Poll::Pending
    }
}

/// The results of a [`Client::map`] job as they arrive.
pub struct JobStream {
    rx: mpsc::UnboundedReceiver<(usize, Result<Bytes, TaskError>)>,
    specs: Vec<u64>,
    shared: Arc<Shared>,
    remaining: usize,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl JobStream {
    /// Results not yet yielded.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// The next `(index, result)`; `None` once every task has yielded one.
    pub async fn next(&mut self) -> Option<(usize, Result<Bytes, TaskError>)> {
        std::future::poll_fn(|cx| self.poll_next_result(cx)).await
    }

    /// Cancels every task of the job that has not finished; each yields
    /// [`TaskError::Canceled`].
    pub fn cancel(&self) {
        self.shared.cancel(self.specs.clone(), TaskError::Canceled);
    }

    fn poll_next_result(&mut self, cx: &mut Context<'_>) -> Poll<Option<(usize, Result<Bytes, TaskError>)>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = self.rx.poll_recv(cx) {
            self.remaining -= 1;
            return Poll::Ready(item);
        }
        if let Some(d) = self.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                self.deadline = None;
                self.shared.cancel(self.specs.clone(), TaskError::Timeout);
                return self.poll_next_result(cx);
            }
        }
        Poll::Pending
    }
}

impl futures_core::Stream for JobStream {
    type Item = (usize, Result<Bytes, TaskError>);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_next_result(cx)
    }
}

impl Drop for JobStream {
    fn drop(&mut self) {
        if self.remaining > 0 {
            self.shared.cancel(std::mem::take(&mut self.specs), TaskError::Canceled);
        }
    }
}

/// The background task: submits, drives the scheduler client (resends, claims), and
/// fails the tasks of jobs the scheduler gave up on.
async fn drive(
    mut scheduler: SchedulerClient,
    mut cmds: mpsc::UnboundedReceiver<Command>,
    shared: std::sync::Weak<Shared>,
) {
    let mut job_of: HashMap<u64, u32> = HashMap::new();
    let mut specs_of: HashMap<u32, Vec<u64>> = HashMap::new();
    loop {
        tokio::select! {
            biased;
            cmd = cmds.recv() => {
                let Some(cmd) = cmd else { break };
                let Some(shared) = shared.upgrade() else { break };
                match cmd {
                    Command::Submit { specs, tasks } => match scheduler.add_job(&tasks) {
                        Ok(jid) => {
                            for &s in &specs {
                                job_of.insert(s, jid);
                            }
                            specs_of.insert(jid, specs);
                            scheduler.flush().await;
                        }
                        Err(e) => {
                            for s in specs {
                                shared.finish(s, Err(TaskError::Client(format!("{e:#}"))));
                            }
                        }
                    },
                    Command::Canceled { specs } => {
                        let table = shared.specs.lock().expect("spec table");
                        let jobs: Vec<u32> = specs.iter().filter_map(|s| job_of.get(s).copied()).collect();
                        for jid in jobs {
                            let left = specs_of.get(&jid).is_some_and(|all| all.iter().any(|s| table.contains_key(s)));
                            if !left {
                                scheduler.cancel_job(jid);
                            }
                        }
                    }
                }
            }
            // Cancel-safe: dropped only while waiting on its socket or a timer (a SUBMIT
            // cut off mid-send is resent on its timeout).
            r = scheduler.drive_until(Instant::now() + GIVE_UP_CHECK) => {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "client driver");
                }
            }
        }
        let finished = scheduler.take_finished();
        if finished.is_empty() {
            continue;
        }
        let Some(shared) = shared.upgrade() else { break };
        for report in finished {
            let Some(specs) = specs_of.remove(&report.jid) else { continue };
            let mut stores: Vec<SocketAddrV4> = {
                let mut held = shared.output_stores.lock().expect("output stores");
                specs.iter().filter_map(|s| held.remove(s)).collect()
            };
            stores.sort_unstable();
            stores.dedup();
            if !stores.is_empty() {
                shared.collect_garbage(vec![JobRef::new(shared.uid, report.jid)], stores);
            }
            for s in specs {
                job_of.remove(&s);
                // Tasks with a RESULT are gone from the table already; the rest got none.
                let refused = shared.specs.lock().expect("spec table").get_mut(&s).and_then(|p| p.refused.take());
                let why = match refused {
                    Some(msg) => TaskError::Refused(msg),
                    None => TaskError::Lost("no executor returned a result after every attempt".into()),
                };
                shared.finish(s, Err(why));
            }
        }
    }
}

/// What a RESULT means for the caller; fetches an output that did not travel inline
/// (blocking: called off the async threads).
fn outcome(r: SpecResult) -> Result<Bytes, TaskError> {
    match r.status {
        STATUS_OK => {}
        STATUS_FAILED => return Err(TaskError::Failed(r.message)),
        _ => return Err(TaskError::Refused(r.message)),
    }
    let Some(o) = r.output else { return Ok(Bytes::new()) };
    if r.inline.len() as u64 == o.size {
        return Ok(Bytes::from(r.inline));
    }
    store_client::get(SocketAddr::V4(o.store), &o.name, STORE_TIMEOUT)
        .map(Bytes::from)
        .map_err(|e| TaskError::Client(format!("fetching output {}: {e}", o.name)))
}

/// Takes each RESULT from the spec server (on its connection's thread, before the
/// RESULT is acknowledged): a refusal is kept for later (another executor may have the
/// handler), anything else finishes the task. A stored output is fetched here, so the
/// executor's COMPLETE, and with it the end of the job, come after the fetch.
fn on_result(shared: &std::sync::Weak<Shared>, spec: u64, r: SpecResult) {
    let Some(shared) = shared.upgrade() else { return };
    if r.status == STATUS_REFUSED {
        if let Some(p) = shared.specs.lock().expect("spec table").get_mut(&spec) {
            p.refused = Some(r.message);
        }
        return;
    }
    let Some(pending) = shared.take(spec) else { return };
    if let Some(o) = r.output.as_ref().filter(|o| r.inline.len() as u64 != o.size && r.status == STATUS_OK) {
        shared.output_stores.lock().expect("output stores").insert(spec, o.store);
    }
    pending.reply.send(outcome(r));
}
