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


def starts(refs, deadline):
    return ray.get(refs, timeout=max(0.001, deadline - time.monotonic()))


try:
    measure(args, submit, starts)
finally:
    ray.shutdown()
