//! `bolt._native`: the bolt crate's client and executors, a software switch and an
//! object store, for the pure-Python layer in `python/bolt/` (serialisation, futures,
//! asyncio, `@bolt.task`). Calls that wait release the GIL; outcomes are handed to a
//! Python callback from the runtime's threads.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use scheduler_user::store::{self, StoreConfig, StoreHandle};
use scheduler_user::switch::{self, SwitchConfig, SwitchHandle};
use tokio::sync::Notify;

/// Set by `bolt`'s atexit hook: the interpreter is about to finalize, and a thread of
/// ours that asked for the GIL then would be ended under Rust frames (an abort).
static CLOSING: AtomicBool = AtomicBool::new(false);

/// Called once at interpreter exit (after the executors were shut down): no callback
/// into Python from here on.
#[pyfunction]
fn _close() {
    CLOSING.store(true, Ordering::SeqCst);
}

/// Runs `f` with the GIL unless the interpreter is exiting.
fn with_python(f: impl FnOnce(Python<'_>)) {
    if !CLOSING.load(Ordering::SeqCst) {
        Python::with_gil(f);
    }
}

thread_local! {
    /// The task the executor thread is running a Python function for, while it runs.
    static CURRENT: RefCell<Option<bolt::TaskContext>> = const { RefCell::new(None) };
}

/// The task running on this executor thread (`bolt.current_task()`).
#[pyclass(module = "bolt._native")]
struct CurrentTask {
    ctx: bolt::TaskContext,
}

#[pymethods]
impl CurrentTask {
    /// True once the caller no longer waits for this run's result (canceled, timed out,
    /// or the claim lapsed): see `bolt::TaskContext::cancelled`.
    fn cancelled(&self) -> bool {
        self.ctx.cancelled()
    }

    #[getter]
    fn spec_id(&self) -> u64 {
        self.ctx.spec_id
    }
}

/// The task this thread runs, from inside a function an executor called; an error
/// anywhere else.
#[pyfunction]
fn current_task() -> PyResult<CurrentTask> {
    CURRENT
        .with(|c| c.borrow().clone())
        .map(|ctx| CurrentTask { ctx })
        .ok_or_else(|| PyRuntimeError::new_err("current_task() is called from a function an executor runs"))
}

/// One runtime per process for every client's background work.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bolt-py")
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

fn addr(s: &str) -> PyResult<SocketAddr> {
    s.parse().map_err(|e| PyValueError::new_err(format!("{s:?} is not an address (IP:port): {e}")))
}

fn err(e: anyhow::Error) -> PyErr {
    PyRuntimeError::new_err(format!("{e:#}"))
}

fn seconds(s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|e| PyValueError::new_err(format!("{s} seconds: {e}")))
}

/// The kind of error, as the Python layer names its exception classes.
fn kind(e: &bolt::TaskError) -> (&'static str, String) {
    use bolt::TaskError::*;
    match e {
        Failed(m) => ("failed", m.clone()),
        Refused(m) => ("refused", m.clone()),
        Timeout => ("timeout", "no result within the task's timeout".into()),
        Canceled => ("canceled", "canceled".into()),
        Lost(m) => ("lost", m.clone()),
        Client(m) => ("client", m.clone()),
    }
}

/// Calls `callback(*args)`; an exception in it is printed, as a thread's would be.
fn deliver<'py>(py: Python<'py>, callback: &PyObject, args: impl IntoPyObject<'py, Target = pyo3::types::PyTuple>) {
    if let Err(e) = callback.call1(py, args) {
        e.print(py);
    }
}

fn outcome_args(py: Python<'_>, r: &Result<bolt::Bytes, bolt::TaskError>) -> (Option<&'static str>, PyObject) {
    match r {
        Ok(b) => (None, PyBytes::new(py, b).into_any().unbind()),
        Err(e) => {
            let (k, m) = kind(e);
            (Some(k), m.into_pyobject(py).expect("a str converts").into_any().unbind())
        }
    }
}

/// A connected client.
#[pyclass(module = "bolt._native")]
struct Client {
    inner: bolt::Client,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (switch, store=None, timeout=None, attempt_timeout=2.0, max_attempts=3))]
    fn new(
        py: Python<'_>,
        switch: &str,
        store: Option<&str>,
        timeout: Option<f64>,
        attempt_timeout: f64,
        max_attempts: u8,
    ) -> PyResult<Client> {
        let mut b =
            bolt::Client::builder(addr(switch)?).attempt_timeout(seconds(attempt_timeout)?).max_attempts(max_attempts);
        if let Some(s) = store {
            b = b.store(addr(s)?);
        }
        if let Some(t) = timeout {
            b = b.timeout(seconds(t)?);
        }
        let inner = py.allow_threads(|| runtime().block_on(b.connect())).map_err(err)?;
        Ok(Client { inner })
    }

    /// Submits one task; `on_done(kind, value)` is called once, from another thread:
    /// kind None and the output bytes, or an error kind and its message.
    #[pyo3(signature = (handler, payload, on_done, timeout=None))]
    fn submit(&self, handler: &str, payload: Vec<u8>, on_done: PyObject, timeout: Option<f64>) -> PyResult<Task> {
        let _rt = runtime().enter();
        let mut fut = self.inner.submit(handler, payload);
        if let Some(t) = timeout {
            fut = fut.timeout(seconds(t)?);
        }
        let canceler = fut.canceler();
        runtime().spawn(async move {
            let r = fut.await;
            with_python(|py| deliver(py, &on_done, outcome_args(py, &r)));
        });
        Ok(Task { canceler })
    }

    /// Submits one task per payload as one job; `on_item(index, kind, value)` is called
    /// once per task as results arrive, then `on_item(None, None, None)`.
    #[pyo3(signature = (handler, payloads, on_item, timeout=None))]
    fn map(&self, handler: &str, payloads: Vec<Vec<u8>>, on_item: PyObject, timeout: Option<f64>) -> PyResult<Job> {
        let timeout = timeout.map(seconds).transpose()?;
        let _rt = runtime().enter();
        let mut stream = self.inner.map(handler, payloads);
        let cancel = Arc::new(Notify::new());
        let canceled = cancel.clone();
        runtime().spawn(async move {
            let deadline = async {
                match timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(deadline);
            let mut stopped = false;
            loop {
                tokio::select! {
                    item = stream.next() => {
                        let Some((i, r)) = item else { break };
                        with_python(|py| {
                            let (k, v) = outcome_args(py, &r);
                            deliver(py, &on_item, (Some(i), k, v));
                        });
                    }
                    _ = canceled.notified(), if !stopped => {
                        stopped = true;
                        stream.cancel();
                    }
                    _ = &mut deadline, if !stopped => {
                        stopped = true;
                        stream.cancel();
                    }
                }
            }
            with_python(|py| deliver(py, &on_item, (None::<usize>, None::<&str>, py.None())));
        });
        Ok(Job { cancel })
    }

    /// The user id in this client's SUBMITs.
    #[getter]
    fn uid(&self) -> u32 {
        self.inner.uid()
    }
}

/// Cancels one submitted task.
#[pyclass(module = "bolt._native")]
struct Task {
    canceler: bolt::Canceler,
}

#[pymethods]
impl Task {
    fn cancel(&self) {
        self.canceler.cancel();
    }
}

/// Cancels what has not finished of a job.
#[pyclass(module = "bolt._native")]
struct Job {
    cancel: Arc<Notify>,
}

#[pymethods]
impl Job {
    fn cancel(&self) {
        self.cancel.notify_one();
    }
}

/// Executor threads running Python callables: `handlers` maps a name to a callable
/// taking the input bytes and returning the output bytes; an exception becomes the
/// task's error, its text the message.
#[pyclass(module = "bolt._native")]
struct Executor {
    inner: Option<bolt::Executor>,
}

#[pymethods]
impl Executor {
    #[new]
    #[pyo3(signature = (switch, store, handlers, executors=1, node=0, resources=0))]
    fn new(
        py: Python<'_>,
        switch: &str,
        store: &str,
        handlers: &Bound<'_, PyDict>,
        executors: u16,
        node: u16,
        resources: u8,
    ) -> PyResult<Executor> {
        let mut b = bolt::Executor::builder(addr(switch)?).executors(executors).node(node).resources(resources);
        for (name, f) in handlers.iter() {
            let name: String = name.extract()?;
            let f: PyObject = f.unbind();
            b = b.handler(&name, move |ctx| {
                if CLOSING.load(Ordering::SeqCst) {
                    return Err("the executor's interpreter is exiting".to_string());
                }
                let input = ctx.input.clone();
                CURRENT.with(|c| *c.borrow_mut() = Some(ctx));
                let ran = Python::with_gil(|py| {
                    let input = PyBytes::new(py, &input);
                    match f.call1(py, (input,)) {
                        Ok(out) => out.extract::<Vec<u8>>(py).map_err(|e| e.to_string()),
                        Err(e) => Err(e.value(py).to_string()),
                    }
                });
                CURRENT.with(|c| *c.borrow_mut() = None);
                ran
            });
        }
        let store = addr(store)?;
        let inner = py.allow_threads(|| b.spawn(store)).map_err(err)?;
        Ok(Executor { inner: Some(inner) })
    }

    /// Tasks run, ok, failed, refused so far, as a dict. A task's counters move just
    /// after its result reached the client; `shutdown()` returns the final ones.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.inner {
            Some(e) => counters_dict(py, &e.counters()),
            None => Ok(PyDict::new(py)),
        }
    }

    /// Stops pulling, finishes the running tasks, joins the threads; returns the final
    /// counters (empty if it was already shut down).
    fn shutdown<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match self.inner.take() {
            Some(e) => {
                let c = py.allow_threads(|| e.shutdown());
                counters_dict(py, &c)
            }
            None => Ok(PyDict::new(py)),
        }
    }
}

fn counters_dict<'py>(py: Python<'py>, c: &scheduler_user::executor::CounterSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("tasks_run", c.tasks_run)?;
    d.set_item("tasks_ok", c.tasks_ok)?;
    d.set_item("tasks_failed", c.tasks_failed)?;
    d.set_item("tasks_refused", c.tasks_refused)?;
    d.set_item("claims_denied", c.claims_denied)?;
    Ok(d)
}

/// A software switch (tier 2) in this process, for loopback runs.
#[pyclass(module = "bolt._native")]
struct Switch {
    inner: Option<SwitchHandle>,
    address: String,
}

#[pymethods]
impl Switch {
    #[new]
    #[pyo3(signature = (listen="127.0.0.1:0"))]
    fn new(listen: &str) -> PyResult<Switch> {
        let inner = switch::spawn(SwitchConfig { listen: addr(listen)?, ..SwitchConfig::default() }).map_err(err)?;
        let address = inner.local_addr().to_string();
        Ok(Switch { inner: Some(inner), address })
    }

    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    fn shutdown(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take() {
            Some(s) => py.allow_threads(|| s.shutdown()).map(drop).map_err(err),
            None => Ok(()),
        }
    }
}

/// An object store in this process, for loopback runs.
#[pyclass(module = "bolt._native")]
struct Store {
    inner: Option<StoreHandle>,
    address: String,
}

#[pymethods]
impl Store {
    #[new]
    #[pyo3(signature = (listen="127.0.0.1:0"))]
    fn new(listen: &str) -> PyResult<Store> {
        let inner = store::spawn(StoreConfig::new(addr(listen)?)).map_err(err)?;
        let address = inner.addr().to_string();
        Ok(Store { inner: Some(inner), address })
    }

    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    /// Objects put and fetched so far, as a dict.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        if let Some(s) = &self.inner {
            let c = s.snapshot();
            d.set_item("puts", c.puts)?;
            d.set_item("gets", c.gets)?;
            d.set_item("objects", c.objects)?;
        }
        Ok(d)
    }

    fn shutdown(&mut self, py: Python<'_>) {
        if let Some(s) = self.inner.take() {
            py.allow_threads(|| drop(s.shutdown()));
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_class::<Task>()?;
    m.add_class::<Job>()?;
    m.add_class::<Executor>()?;
    m.add_class::<Switch>()?;
    m.add_class::<Store>()?;
    m.add_class::<CurrentTask>()?;
    m.add_function(wrap_pyfunction!(_close, m)?)?;
    m.add_function(wrap_pyfunction!(current_task, m)?)?;
    Ok(())
}
