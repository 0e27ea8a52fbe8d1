"""Bolt's Python front door: the `bolt` package on loopback. This process runs the
package's software switch and object store and submits tasks one by one with
Client.submit (JSON arguments and result); a second process runs a bolt.Executor of
--workers executor threads with the task registered as a Python function, as the other
peers run their workers apart from the submitter."""

import subprocess
import sys
import time

from peers_common import measure, parse_args, task_body, unavailable, wait_or_kill

NAME = "task_body"


def serve_executors(switch, store, executors):
    """The executor process: runs until its stdin closes."""
    import bolt

    executor = bolt.Executor(switch, store=store, executors=executors, tasks={NAME: task_body})
    print("ready", flush=True)
    sys.stdin.read()
    executor.shutdown()


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "executors":
        serve_executors(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    args = parse_args()
    try:
        import bolt
    except ImportError as e:
        unavailable(f"the bolt package does not import: {e}")

    switch, store = bolt.Switch(), bolt.Store()
    worker = subprocess.Popen(
        [sys.executable, __file__, "executors", switch.address, store.address, str(args.workers)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    client = None
    try:
        if worker.stdout.readline().strip() != "ready":
            unavailable(f"the executor process exited before it was ready (exit {worker.wait()})")
        client = bolt.Client(switch.address, store=store.address)

        def submit(micros):
            future = client.submit(NAME, micros)
            # Noted by whichever thread completes the future: when the result arrived.
            future.add_done_callback(lambda f: setattr(f, "arrived_ns", time.time_ns()))
            return future

        def results(futures, deadline):
            starts = [f.result(timeout=max(0.0, deadline - time.monotonic())) for f in futures]
            return [(start, f.arrived_ns) for start, f in zip(starts, futures)]

        measure(args, submit, results)
    finally:
        if client is not None:
            client.close()
        worker.stdin.close()
        wait_or_kill(worker, 30)
        store.shutdown()
        switch.shutdown()


if __name__ == "__main__":
    main()
