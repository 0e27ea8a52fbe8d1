"""Per-task overhead of a Python no-op function through Bolt on loopback: submitted from
Python, run by Python executors (JSON arguments and result).

    target/python-venv/bin/python examples/overhead.py --tasks 2000

Latency: one task at a time, submit to result (p50, p99). Throughput: the tasks as one
job (`Client.map`), first submit to last result.
"""

import argparse
import sys
import time

import bolt


@bolt.task
def nothing(i):
    return i


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--executors", type=int, default=2)
    args = p.parse_args(argv)

    switch, store = bolt.Switch(), bolt.Store()
    executor = bolt.Executor(switch.address, store=store.address, executors=args.executors)
    client = bolt.Client(switch.address, timeout=60)
    latencies = []
    for i in range(args.tasks):
        t = time.perf_counter()
        client.submit(nothing, i).result()
        latencies.append(time.perf_counter() - t)
    latencies.sort()
    t = time.perf_counter()
    assert list(client.map(nothing, range(args.tasks))) == list(range(args.tasks))
    elapsed = time.perf_counter() - t
    p50 = latencies[len(latencies) // 2] * 1e6
    p99 = latencies[int((len(latencies) - 1) * 0.99)] * 1e6
    print(f"{'Python no-op (bolt package)':<28} p50 {p50:7.1f} us  p99 {p99:7.1f} us  throughput {args.tasks / elapsed:8.0f} tasks/s")
    executor.shutdown()
    store.shutdown()
    switch.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
