"""The bolt Python package end to end on loopback: a software switch, an object store
and executors in this process (one test kills an executor in a child process)."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import bolt

WAIT = 20  # seconds any one result may take before the test fails


@bolt.task
def add(a, b):
    return a + b


@bolt.task
def explode(x):
    raise ValueError(f"cannot take {x}")


@bolt.task
def nap(seconds):
    time.sleep(seconds)
    return "awake"


@bolt.task
def reverse(s):
    return s[::-1]


@bolt.task(name="count_calls")
def counted(x):
    CALLS.append(x)
    return x


CALLS = []


@bolt.task
def wait_for_cancel(seconds):
    """Polls its task's cancel flag; says whether it saw it."""
    CALLS.append("started")
    deadline = time.monotonic() + seconds
    while not bolt.current_task().cancelled() and time.monotonic() < deadline:
        time.sleep(0.005)
    CALLS.append("saw cancel" if bolt.current_task().cancelled() else "ran out")
    return "stopped"


@pytest.fixture
def rig():
    switch, store = bolt.Switch(), bolt.Store()
    executor = bolt.Executor(switch.address, store=store.address, executors=2)
    yield switch, store, executor
    executor.shutdown()
    store.shutdown()
    switch.shutdown()


def test_submit_returns_the_result(rig):
    switch, _, _ = rig
    client = bolt.Client(switch.address)
    assert client.submit(add, 2, 3).result(timeout=WAIT) == 5
    assert client.submit("add", "a", b="b").result(timeout=WAIT) == "ab"
    assert client.submit(add, [1], [2]).result(timeout=WAIT) == [1, 2]


def test_map_yields_every_result_in_order(rig):
    switch, _, executor = rig
    client = bolt.Client(switch.address)
    xs = list(range(200))
    assert list(client.map(add, xs, [1000] * len(xs))) == [x + 1000 for x in xs]
    assert executor.shutdown()["tasks_ok"] == 200


def test_an_exception_reaches_the_caller_with_its_traceback(rig):
    switch, _, _ = rig
    client = bolt.Client(switch.address)
    with pytest.raises(bolt.TaskFailed) as err:
        client.submit(explode, 7).result(timeout=WAIT)
    text = str(err.value)
    assert "Traceback (most recent call last)" in text
    assert "in explode" in text
    assert "ValueError: cannot take 7" in text
    # In a map, the first error is raised where its result is reached.
    results = client.map(explode, [1, 2])
    with pytest.raises(bolt.TaskFailed, match="cannot take 1"):
        next(results)
    # A function no executor registered is refused.
    quick = bolt.Client(switch.address, attempt_timeout=0.3)
    with pytest.raises(bolt.TaskRefused, match="no handler of that name is registered"):
        quick.submit("nobody", 1).result(timeout=WAIT)


def test_a_task_past_its_timeout_raises_timeout(rig):
    switch, _, _ = rig
    client = bolt.Client(switch.address, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(bolt.TaskTimeout):
        client.submit(nap, 2).result(timeout=WAIT)
    assert time.monotonic() - started < 2
    per_task = bolt.Client(switch.address).submit_task(nap, (2,), timeout=0.1)
    with pytest.raises(TimeoutError):
        per_task.result(timeout=WAIT)


def test_a_canceled_task_never_runs():
    switch, store = bolt.Switch(), bolt.Store()
    client = bolt.Client(switch.address)
    CALLS.clear()
    future = client.submit(counted, "canceled")
    time.sleep(0.1)
    assert future.cancel()
    assert future.cancelled()
    # Executors start after the cancel: they pull the task and their claim is denied.
    executor = bolt.Executor(switch.address, store=store.address)
    try:
        assert client.submit(counted, "kept").result(timeout=WAIT) == "kept"
        assert CALLS == ["kept"]
    finally:
        counters = executor.shutdown()
        store.shutdown()
        switch.shutdown()
    assert counters["claims_denied"] == 1, "the canceled task was pulled and its claim denied"


def test_asyncio(rig):
    switch, _, _ = rig
    client = bolt.Client(switch.address)

    async def main():
        one = await client.run(add, 1, 1)
        many = await asyncio.gather(*(client.run(add, i, i) for i in range(20)))
        return one, many

    one, many = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert one == 2
    assert many == [2 * i for i in range(20)]


def test_a_large_argument_and_result_travel_through_the_store(rig):
    switch, store, _ = rig
    client = bolt.Client(switch.address, store=store.address)
    text = "".join(chr(ord("a") + i % 26) for i in range(1_000_000))
    before = store.counters()
    assert client.submit(reverse, text).result(timeout=WAIT) == text[::-1]
    after = store.counters()
    assert after["puts"] - before["puts"] == 2, "the argument and the result were put"
    assert after["gets"] - before["gets"] == 2, "the argument and the result were fetched"
    # Both leave the store once the task is final; a small result is never put.
    deadline = time.monotonic() + 5
    while store.counters()["objects"] > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.counters()["objects"] == 0, "the argument and the result were deleted"
    assert client.submit(reverse, "abc").result(timeout=WAIT) == "cba"
    assert store.counters()["puts"] == after["puts"]


def test_a_running_function_sees_its_cancel_and_its_executor_runs_the_next_task():
    switch, store = bolt.Switch(), bolt.Store()
    # One executor thread: the next task runs only once the canceled one returned.
    executor = bolt.Executor(switch.address, store=store.address, executors=1)
    try:
        client = bolt.Client(switch.address)
        CALLS.clear()
        future = client.submit(wait_for_cancel, 10)
        deadline = time.monotonic() + WAIT
        while not CALLS and time.monotonic() < deadline:
            time.sleep(0.005)
        assert CALLS == ["started"]
        started = time.monotonic()
        assert future.cancel()
        # Learned at the claim's next lease renewal (every 250 ms), not after 10 s.
        assert client.submit(add, 1, 2).result(timeout=WAIT) == 3
        assert time.monotonic() - started < 5
        assert CALLS == ["started", "saw cancel"]
        # A timeout is seen the same way (from a client that is still there to deny the
        # renewal: the renewals to a client that is gone go unanswered).
        impatient = bolt.Client(switch.address, timeout=0.1)
        with pytest.raises(bolt.TaskTimeout):
            impatient.submit(wait_for_cancel, 10).result(timeout=WAIT)
        assert client.submit(add, 2, 2).result(timeout=WAIT) == 4
        assert CALLS[-1] == "saw cancel"
        with pytest.raises(RuntimeError, match="from a function an executor runs"):
            bolt.current_task()
    finally:
        executor.shutdown()
        store.shutdown()
        switch.shutdown()


def test_pickled_arguments_are_refused_unless_opted_in(rig):
    switch, _, _ = rig
    client = bolt.Client(switch.address, serializer="pickle")
    with pytest.raises(bolt.TaskFailed, match="pickled data refused"):
        client.submit(add, 1, 2).result(timeout=WAIT)
    # Executors whose operator opted in take them (and pickled results come back).
    other_switch, other_store = bolt.Switch(), bolt.Store()
    trusting = bolt.Executor(other_switch.address, store=other_store.address, allow_pickle=True)
    try:
        client = bolt.Client(other_switch.address, serializer="pickle")
        assert client.submit(add, b"by", b"tes").result(timeout=WAIT) == b"bytes"
    finally:
        trusting.shutdown()
        other_store.shutdown()
        other_switch.shutdown()


CHILD = textwrap.dedent(
    """
    import sys, time, bolt
    switch, store, mark = sys.argv[1:4]

    def work(x):
        open(mark, "w").write("started")
        time.sleep(60)
        return "from the killed executor"

    executor = bolt.Executor(switch, store=store, tasks={"work": work})
    time.sleep(60)
    """
)


def test_an_executor_killed_mid_task_leaves_it_to_another(tmp_path):
    switch, store = bolt.Switch(), bolt.Store()
    mark = tmp_path / "started"
    child = subprocess.Popen([sys.executable, "-c", CHILD, switch.address, store.address, str(mark)])
    try:
        client = bolt.Client(switch.address, attempt_timeout=0.5)
        future = client.submit("work", "input")
        deadline = time.monotonic() + WAIT
        while not mark.exists():
            assert time.monotonic() < deadline, "the child executor never started the task"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=WAIT)
        survivor = bolt.Executor(switch.address, store=store.address, tasks={"work": lambda x: "finished: " + x})
        try:
            assert future.result(timeout=WAIT) == "finished: input"
        finally:
            assert survivor.shutdown()["tasks_ok"] == 1
    finally:
        if child.poll() is None:
            child.kill()
        store.shutdown()
        switch.shutdown()
