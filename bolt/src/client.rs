//! The client handle: submit tasks by handler name and await their outputs.
//!
//! A [`Client`] is a cheap, cloneable handle onto one background task that owns the
//! scheduler client (one UDP socket and its `Tracker`: windows, resends on timeout,
//! claims) and onto a spec server (TCP) from which executors fetch each task's spec
//! and to which they send its RESULT. A task's future resolves when its RESULT arrives:
//! the spec server hands it over directly, so no timer sits between a result and its
//! caller.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use scheduler_common::data::{self, DataFrame, ErrorCode, ObjectRef, TaskResult};
use scheduler_common::descriptor::Handler;
use scheduler_common::layout::{JobRef, STATUS_FAILED, STATUS_OK, STATUS_REFUSED};
use scheduler_user::client::{Client as SchedulerClient, ClientConfig, TaskSpec};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::error::TaskError;
use crate::{frames, store};

/// Inputs up to this size travel in the spec; larger ones go through the object store
/// (when the client has one, [`ClientBuilder::store`]).
pub const INLINE_INPUT_MAX: usize = 64 * 1024;

/// How often the background task looks for tasks the scheduler gave up on. Results and
/// submissions never wait for it: both wake the task at once.
const GIVE_UP_CHECK: Duration = Duration::from_millis(20);

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
        let scheduler = SchedulerClient::bind(cfg).await?;
        // Executors reach the spec server at the address the switch records for the
        // SUBMIT (the UDP socket's IP) and the port in the descriptor.
        let ip = scheduler.local_addr()?.ip();
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).await.context("binding the spec server")?;
        let spec_port = listener.local_addr()?.port();
        let (cmds, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            specs: Mutex::new(HashMap::new()),
            next_spec: AtomicU64::new(1),
            cmds,
            spec_port,
            uid: self.uid,
            settings: self.clone(),
        });
        tokio::spawn(serve_specs(listener, Arc::downgrade(&shared)));
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
    Stored { name: String, size: u64, store: SocketAddr },
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
    next_spec: AtomicU64,
    cmds: mpsc::UnboundedSender<Command>,
    spec_port: u16,
    uid: u32,
    settings: ClientBuilder,
}

impl Shared {
    fn finish(&self, spec: u64, r: Result<Bytes, TaskError>) -> bool {
        let pending = self.specs.lock().expect("spec table").remove(&spec);
        match pending {
            Some(p) => {
                p.reply.send(r);
                true
            }
            None => false,
        }
    }

    fn cancel(&self, specs: Vec<u64>, why: TaskError) {
        for &s in &specs {
            self.finish(s, Err(why.clone()));
        }
        let _ = self.cmds.send(Command::Canceled { specs });
    }

    fn task_spec(&self, spec_id: u64) -> TaskSpec {
        let handler = Handler::Spec { port: self.spec_port, spec_id };
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
            let tasks = specs.iter().map(|&s| shared.task_spec(s)).collect();
            let _ = shared.cmds.send(Command::Submit { specs, tasks });
        };
        let Some(store_addr) = shared.settings.store.filter(|_| !large.is_empty()) else {
            submit(shared, specs);
            return;
        };
        tokio::spawn(async move {
            for (spec, input) in large {
                let name = format!("in/u{}/s{spec}", shared.uid);
                let owner = JobRef::new(shared.uid, 0);
                match store::put(store_addr, owner, &name, &input).await {
                    Ok(()) => {
                        if let Some(p) = shared.specs.lock().expect("spec table").get_mut(&spec) {
                            p.input = Input::Stored { name, size: input.len() as u64, store: store_addr };
                        }
                    }
                    Err(e) => {
                        shared.finish(spec, Err(TaskError::Client(format!("putting the input in the store: {e:#}"))));
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

/// The spec server: executors fetch specs (SPEC_GET → SPEC) and report how they ended
/// (RESULT → RESULT_ACK). One task per connection.
async fn serve_specs(listener: TcpListener, shared: std::sync::Weak<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        if shared.strong_count() == 0 {
            return;
        }
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_connection(stream, shared.clone()));
    }
}

async fn serve_connection(mut stream: TcpStream, shared: std::sync::Weak<Shared>) {
    loop {
        let frame = match frames::read_async(&mut stream).await {
            Ok(f) => f,
            Err(frames::ReadError::Io(_)) => return,
            Err(frames::ReadError::Refused(e)) => {
                tracing::debug!(error = %e, "spec server: frame refused");
                let msg = e.to_string();
                let _ = write(&mut stream, &DataFrame::Error { code: ErrorCode::BadRequest, message: &msg }).await;
                return;
            }
        };
        let Some(shared) = shared.upgrade() else { return };
        let answer = match frame.frame() {
            DataFrame::SpecGet { spec_id } => spec_frame(&shared, spec_id),
            DataFrame::Result(r) if r.status == STATUS_REFUSED => {
                // Not final: the scheduler sends it to another executor, which may have
                // the handler; the message is kept for when every attempt is refused.
                if let Some(p) = shared.specs.lock().expect("spec table").get_mut(&r.spec_id) {
                    p.refused = Some(r.message.to_string());
                }
                frames::encode(&DataFrame::ResultAck { spec_id: r.spec_id })
            }
            DataFrame::Result(r) => {
                let spec_id = r.spec_id;
                let outcome = outcome(&r).await;
                shared.finish(spec_id, outcome);
                frames::encode(&DataFrame::ResultAck { spec_id })
            }
            other => {
                let msg = format!("a spec server takes SPEC_GET and RESULT, not {:?}", other.kind());
                frames::encode(&DataFrame::Error { code: ErrorCode::BadRequest, message: &msg })
            }
        };
        match answer {
            Ok(bytes) => {
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "spec server: answer not encodable");
                return;
            }
        }
    }
}

async fn write(stream: &mut TcpStream, frame: &DataFrame<'_>) -> anyhow::Result<()> {
    stream.write_all(&frames::encode(frame)?).await?;
    Ok(())
}

fn spec_frame(shared: &Shared, spec_id: u64) -> anyhow::Result<Vec<u8>> {
    let table = shared.specs.lock().expect("spec table");
    let Some(p) = table.get(&spec_id) else {
        // Finished, canceled or timed out: the executor must not run it.
        let msg = format!("no spec {spec_id} (finished or canceled)");
        return frames::encode(&DataFrame::Error { code: ErrorCode::UnknownSpec, message: &msg });
    };
    let output = format!("out/u{}/s{spec_id}", shared.uid);
    let (args, input): (&[u8], Option<ObjectRef<'_>>) = match &p.input {
        Input::Inline(b) => (b, None),
        Input::Stored { name, size, store } => {
            let store_ip = match store.ip() {
                std::net::IpAddr::V4(ip) => ip.octets(),
                std::net::IpAddr::V6(_) => anyhow::bail!("object stores are reached over IPv4"),
            };
            (&[], Some(ObjectRef { name, size: *size, node: 0, store_ip, store_port: store.port() }))
        }
    };
    let mut buf = vec![0u8; data::spec_len(&p.handler, args, &output, input.into_iter())];
    let n = data::encode_spec(&mut buf, spec_id, &p.handler, args, &output, input.into_iter())
        .map_err(|e| anyhow::anyhow!("encoding SPEC {spec_id}: {e}"))?;
    buf.truncate(n);
    Ok(buf)
}

/// What a RESULT means for the caller; fetches an output that did not travel inline.
async fn outcome(r: &TaskResult<'_>) -> Result<Bytes, TaskError> {
    match r.status {
        STATUS_OK => {}
        STATUS_FAILED => return Err(TaskError::Failed(r.message.to_string())),
        _ => return Err(TaskError::Refused(r.message.to_string())),
    }
    let Some(o) = r.output else { return Ok(Bytes::new()) };
    if r.inline.len() as u64 == o.size {
        return Ok(Bytes::copy_from_slice(r.inline));
    }
    let addr = SocketAddr::from((o.store_ip, o.store_port));
    store::get(addr, o.name).await.map_err(|e| TaskError::Client(format!("fetching output {}: {e:#}", o.name)))
}
