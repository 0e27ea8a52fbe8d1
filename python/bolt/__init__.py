"""Run your Python functions on Bolt and get their results back.

    import bolt

    @bolt.task
    def add(a, b):
        return a + b

    with bolt.Client("127.0.0.1:7171") as client:
        print(client.submit(add, 1, 2).result())          # 3
        print(list(client.map(add, [1, 2], [10, 20])))   # [11, 22]

Executors run the registered functions:

    bolt.Executor("127.0.0.1:7171", store="127.0.0.1:7180", executors=4)

Arguments and results travel as JSON (``json.dumps`` / ``json.loads``): no code runs
when data is decoded. ``serializer="pickle"`` on the client, and ``allow_pickle=True``
on the executors (the operator's opt-in), carry any picklable object instead;
executors refuse pickled arguments unless they opted in. A function's exception
reaches the caller as :class:`TaskFailed`, whose message is the remote traceback.
See docs/frontdoor.md.
"""

import asyncio
import atexit
import concurrent.futures
import json
import pickle
import threading
import traceback
import weakref

from . import _native
from ._native import Store, Switch

__all__ = [
    "Client",
    "Executor",
    "Local",
    "Store",
    "Switch",
    "task",
    "current_task",
    "registered",
    "TaskError",
    "TaskFailed",
    "TaskRefused",
    "TaskTimeout",
    "TaskCanceled",
    "TaskLost",
]

_JSON = b"j"
_PICKLE = b"p"
# RESULT carries at most 4096 bytes of error text; the end of a traceback matters most.
_MAX_TRACEBACK = 3500


class TaskError(Exception):
    """A task ended without a result."""


class TaskFailed(TaskError):
    """The function raised; the message is the remote traceback."""


class TaskRefused(TaskError):
    """No executor would run it (no function of that name registered, for example)."""


class TaskTimeout(TaskError, TimeoutError):
    """No result within the task's timeout; the task was canceled."""


class TaskCanceled(TaskError):
    """Canceled by the caller."""


class TaskLost(TaskError):
    """The scheduler gave up on it after every attempt."""


_ERRORS = {
    "failed": TaskFailed,
    "refused": TaskRefused,
    "timeout": TaskTimeout,
    "canceled": TaskCanceled,
    "lost": TaskLost,
    "client": TaskError,
}

_REGISTRY = {}
_EXECUTORS = weakref.WeakSet()


@atexit.register
def _at_exit():
    # Executor threads call into Python; they must be stopped while the interpreter
    # still runs, and nothing may call back into it once it finalizes.
    for executor in list(_EXECUTORS):
        executor.shutdown()
    _native._close()


def task(fn=None, *, name=None):
    """Registers ``fn`` for executors under ``name`` (default: its ``__name__``)."""

    def register(f):
        key = name or f.__name__
        _REGISTRY[key] = f
        f.bolt_name = key
        return f

    return register(fn) if fn is not None else register


def current_task():
    """The task the calling function runs for, from inside a function an executor runs
    (``RuntimeError`` elsewhere). ``current_task().cancelled()`` turns true once the
    caller no longer waits for the result (canceled, timed out, or the executor's claim
    lapsed); a long function may poll it and return early, since a running function is
    never interrupted and its late result is dropped by the client."""
    return _native.current_task()


def registered():
    """The functions registered with ``@bolt.task``, by name."""
    return dict(_REGISTRY)


def _name_of(fn):
    if isinstance(fn, str):
        return fn
    return getattr(fn, "bolt_name", None) or fn.__name__


def _encode(value, serializer):
    if serializer == "json":
        return _JSON + json.dumps(value, separators=(",", ":")).encode()
    if serializer == "pickle":
        return _PICKLE + pickle.dumps(value)
    raise ValueError(f"unknown serializer {serializer!r} (json or pickle)")


def _decode(data, allow_pickle):
    tag, body = bytes(data[:1]), bytes(data[1:])
    if tag == _JSON:
        return json.loads(body)
    if tag == _PICKLE:
        if not allow_pickle:
            raise TaskError("pickled data refused: pickle was not opted in (allow_pickle=True)")
        return pickle.loads(body)
    raise TaskError(f"data in an unknown format (tag {tag!r})")


class BoltFuture(concurrent.futures.Future):
    """A task's result; ``cancel()`` also cancels the task on Bolt."""

    def __init__(self):
        super().__init__()
        self._native_task = None

    def cancel(self):
        if self._native_task is not None:
            self._native_task.cancel()
        return super().cancel()


class Client:
    """A client of the switch (or host agent) at ``switch``, ``"IP:port"``.

    ``store``: this host's object store, where arguments above 64 KiB are put.
    ``timeout``: default seconds per task (``TaskTimeout``); none by default.
    ``serializer``: ``"json"`` (default) or ``"pickle"`` (results are unpickled too).
    """

    def __init__(self, switch, *, store=None, timeout=None, attempt_timeout=2.0, max_attempts=3, serializer="json"):
        if serializer not in ("json", "pickle"):
            raise ValueError(f"unknown serializer {serializer!r} (json or pickle)")
        self._serializer = serializer
        self._timeout = timeout
        self._native = _native.Client(switch, store, timeout, attempt_timeout, max_attempts)

    @property
    def uid(self):
        return self._native.uid

    def _settle(self, future, kind, value):
        if future.cancelled():
            return
        if kind is None:
            try:
                future.set_result(_decode(value, self._serializer == "pickle"))
            except Exception as e:  # a result this client will not decode
                future.set_exception(e)
        else:
            future.set_exception(_ERRORS.get(kind, TaskError)(value))

    def submit_task(self, fn, args=(), kwargs=None, *, timeout=None):
        """Runs ``fn(*args, **kwargs)`` on an executor; returns a ``concurrent.futures.Future``."""
        payload = _encode([list(args), kwargs or {}], self._serializer)
        future = BoltFuture()
        native = self._native.submit(
            _name_of(fn), payload, lambda kind, value: self._settle(future, kind, value), timeout
        )
        future._native_task = native
        return future

    def submit(self, fn, *args, **kwargs):
        """Runs ``fn(*args, **kwargs)`` on an executor; returns a ``concurrent.futures.Future``."""
        return self.submit_task(fn, args, kwargs)

    async def run(self, fn, *args, **kwargs):
        """``await client.run(fn, *args)``: the result, in asyncio."""
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))

    def map(self, fn, *iterables, timeout=None):
        """Like ``concurrent.futures.Executor.map``: one job of tasks ``fn(*args)``, the
        results yielded in input order; the first error is raised when reached, and
        closing the iterator cancels what has not finished."""
        calls = [_encode([list(args), {}], self._serializer) for args in zip(*iterables)]
        results = [None] * len(calls)
        arrived = [False] * len(calls)
        done = threading.Condition()
        finished = [False]

        def on_item(index, kind, value):
            with done:
                if index is None:
                    finished[0] = True
                else:
                    f = concurrent.futures.Future()
                    self._settle(f, kind, value)
                    results[index] = f
                    arrived[index] = True
                done.notify_all()

        job = self._native.map(_name_of(fn), calls, on_item, timeout or self._timeout)

        def ordered():
            try:
                for i in range(len(calls)):
                    with done:
                        while not arrived[i] and not finished[0]:
                            done.wait()
                        if not arrived[i]:
                            raise TaskLost(f"task {i} of the job never reported")
                    yield results[i].result()
            finally:
                job.cancel()

        return ordered()

    def close(self):
        self._native = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _wrap(fn, allow_pickle):
    def run(payload):
        try:
            args, kwargs = _decode(payload, allow_pickle)
        except TaskError as e:
            raise RuntimeError(str(e)) from None
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            if len(text) > _MAX_TRACEBACK:
                text = "...\n" + text[-_MAX_TRACEBACK:]
            raise RuntimeError(text) from None
        return _encode(value, "pickle" if bytes(payload[:1]) == _PICKLE else "json")

    return run


class Executor:
    """Executor threads pulling from ``switch`` and running the registered functions.

    ``store``: this host's object store (results are written there; small ones also
    travel inline). ``tasks``: the functions by name (default: every ``@bolt.task``).
    ``allow_pickle``: accept pickled arguments (only from clients you trust).
    """

    def __init__(self, switch, *, store, executors=1, tasks=None, allow_pickle=False, node=0, resources=0):
        functions = tasks if tasks is not None else registered()
        if not functions:
            raise ValueError("no functions to run: register some with @bolt.task or pass tasks=")
        handlers = {name: _wrap(f, allow_pickle) for name, f in functions.items()}
        self._native = _native.Executor(switch, store, handlers, executors, node, resources)
        _EXECUTORS.add(self)

    def counters(self):
        """Tasks run, ok, failed, refused so far (they move just after a result arrives)."""
        return self._native.counters()

    def shutdown(self):
        """Stops the executors after their running tasks; returns the final counters."""
        return self._native.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


class Local:
    """A software switch, an object store and executors in this process, on loopback:
    everything a script needs to run its functions without a deployment."""

    def __init__(self, *, executors=4, tasks=None, allow_pickle=False):
        self.switch = Switch()
        self.store = Store()
        self.executor = Executor(
            self.switch.address, store=self.store.address, executors=executors, tasks=tasks, allow_pickle=allow_pickle
        )

    def client(self, **options):
        """A client of this switch, putting large arguments in this store."""
        return Client(self.switch.address, store=self.store.address, **options)

    def shutdown(self):
        self.executor.shutdown()
        self.store.shutdown()
        self.switch.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
