"""What every peer driver shares: arguments, the two measurement phases and the JSON
lines they print. A driver supplies `submit(micros)` (returns a handle) and
`results(handles, deadline)`: for each task, in order, once all are done, a pair
(start_ns, result_ns): when the task began on its worker, and when its result reached
this program (the driver notes `time.time_ns()` as it receives each result, one by one).

Timestamps are wall-clock `time.time_ns()` on both sides (submitter and worker), as
Bolt's client and executors use: one host, one clock.
"""

import argparse
import json
import subprocess
import sys
import time
import traceback


def task_body(micros):
    """The task every system runs: note the start, then nothing (noop) or sleep."""
    start = time.time_ns()
    if micros:
        time.sleep(micros / 1e6)
    return start


def parse_args(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--tasks", type=int, required=True, help="tasks of the burst phase")
    p.add_argument("--waves", type=int, required=True, help="waves of one task per worker")
    p.add_argument("--workloads", required=True, help="comma-separated task durations in microseconds (0: noop)")
    p.add_argument("--timeout-s", type=float, required=True, help="per phase")
    p.add_argument("--redis-port", type=int, default=0)
    p.add_argument("--tmp", default="/tmp")
    if extra:
        extra(p)
    return p.parse_args()


def emit(**fields):
    print(json.dumps(fields), flush=True)


def wait_or_kill(proc, timeout_s):
    """Waits for a worker process that was asked to stop; kills it after `timeout_s`."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def unavailable(reason):
    emit(status="unavailable", reason=reason)
    sys.exit(0)


def quantile(values, q):
    if not values:
        return 0.0
    s = sorted(values)
    return float(s[min(len(s) - 1, int(q * len(s)))])


def _phase(submit, results, micros, count, timeout_s):
    """Submits `count` tasks as fast as the system takes them; returns the submit →
    start delays (ns), the submit → result delays (ns) and the seconds from the first
    submit to the last result."""
    deadline = time.monotonic() + timeout_s
    submitted = []
    handles = []
    t0 = time.time_ns()
    for _ in range(count):
        submitted.append(time.time_ns())
        handles.append(submit(micros))
    times = results(handles, deadline)
    t1 = time.time_ns()
    if len(times) != count:
        raise RuntimeError(f"{len(times)} of {count} tasks reported a result")
    starts = [start - q for (start, _), q in zip(times, submitted)]
    done = [result - q for (_, result), q in zip(times, submitted)]
    return starts, done, (t1 - t0) / 1e9


def measure(args, submit, results):
    """Runs every workload: warm-up, a burst of --tasks tasks (throughput, start and
    result delays under load), then --waves waves of one task per worker, each after the
    last finished (start and result delays with idle workers). Prints one JSON line per
    workload."""
    for micros in [int(w) for w in args.workloads.split(",")]:
        try:
            _phase(submit, results, micros, 2 * args.workers, args.timeout_s)
            burst, burst_done, secs = _phase(submit, results, micros, args.tasks, args.timeout_s)
            idle, idle_done = [], []
            for _ in range(args.waves):
                d, r, _ = _phase(submit, results, micros, args.workers, args.timeout_s)
                idle.extend(d)
                idle_done.extend(r)
        except Exception as e:  # reported, never dropped: the bench prints the reason
            traceback.print_exc(file=sys.stderr)
            emit(status="failed", sleep_us=micros, reason=f"{type(e).__name__}: {e}")
            continue
        emit(
            status="ok",
            sleep_us=micros,
            tasks=args.tasks,
            throughput_tasks_per_s=args.tasks / secs,
            burst_delay_p50_us=quantile(burst, 0.5) / 1e3,
            burst_delay_p99_us=quantile(burst, 0.99) / 1e3,
            burst_result_p50_us=quantile(burst_done, 0.5) / 1e3,
            burst_result_p99_us=quantile(burst_done, 0.99) / 1e3,
            idle_tasks=len(idle),
            delay_p50_us=quantile(idle, 0.5) / 1e3,
            delay_p99_us=quantile(idle, 0.99) / 1e3,
            result_p50_us=quantile(idle_done, 0.5) / 1e3,
            result_p99_us=quantile(idle_done, 0.99) / 1e3,
        )
