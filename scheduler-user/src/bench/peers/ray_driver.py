"""Ray: a local Ray instance with --workers CPUs, one CPU per task."""

import time

from peers_common import measure, parse_args, task_body, unavailable

args = parse_args()
try:
    import ray
except ImportError as e:
    unavailable(f"ray does not import: {e}")

ray.init(
    num_cpus=args.workers,
    include_dashboard=False,
    log_to_driver=False,
    object_store_memory=128 << 20,
    _temp_dir=args.tmp,
)
remote_task = ray.remote(num_cpus=1)(task_body)


def submit(micros):
    return remote_task.remote(micros)


def results(refs, deadline):
    """Each result as it is ready (ray.wait one at a time); the ones ready together get
    the same arrival time."""
    arrived = {}
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{len(pending)} results missing")
        ready, pending = ray.wait(pending, num_returns=1, timeout=left)
        if pending:
            more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            ready += more
        now = time.time_ns()
        for ref in ready:
            arrived[ref] = now
    starts = ray.get(list(refs), timeout=max(0.001, deadline - time.monotonic()))
    return [(start, arrived[ref]) for start, ref in zip(starts, refs)]


try:
    measure(args, submit, results)
finally:
    ray.shutdown()
