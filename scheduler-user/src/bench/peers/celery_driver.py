"""Celery with a Redis broker and result backend: one worker (`celery worker`, prefork
pool, --workers processes) started by this driver; results gathered with join_native,
each noted as it arrives.
The bench passes the Redis port in BOLT_PEERS_REDIS_PORT, so that this module
configures the same app in the driver and in the worker that imports it."""

import os
import subprocess
import sys
import time

from peers_common import measure, parse_args, task_body, unavailable, wait_or_kill

try:
    from celery import Celery
    from celery.result import ResultSet
except ImportError as e:
    Celery = None
    IMPORT_ERROR = e

PORT = os.environ.get("BOLT_PEERS_REDIS_PORT", "0")
if Celery is not None:
    app = Celery(
        "celery_driver",
        broker=f"redis://127.0.0.1:{PORT}/0",
        backend=f"redis://127.0.0.1:{PORT}/1",
    )
    app.conf.broker_connection_retry_on_startup = True
    peer_task = app.task(name="peer_task")(task_body)


def main():
    args = parse_args()
    if Celery is None:
        unavailable(f"celery does not import: {IMPORT_ERROR}")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_driver", "worker", "--pool", "prefork",
         "--concurrency", str(args.workers), "--without-gossip", "--without-mingle",
         "--without-heartbeat", "--loglevel", "WARNING"],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        stdout=sys.stderr,
    )

    def submit(micros):
        return peer_task.delay(micros)

    def results(handles, deadline):
        """Each result as the result backend hands it over (join_native's callback)."""
        arrived = {}

        def note(task_id, start):
            arrived[task_id] = (start, time.time_ns())

        # Celery's default poll interval (0.5 s) would bound every wave, not Celery.
        left = max(0.001, deadline - time.monotonic())
        ResultSet(handles).join_native(timeout=left, interval=0.001, callback=note)
        return [arrived[h.id] for h in handles]

    try:
        measure(args, submit, results)
    finally:
        worker.terminate()
        wait_or_kill(worker, 10)


if __name__ == "__main__":
    main()
