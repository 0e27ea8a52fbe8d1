"""Queueing model of the demo's two clients: c executors, fixed-length tasks (plus up to
0.3 ms of jitter), jobs arriving in bursts (each task up to 0.2 ms late), one queue per
priority served highest first (or one FIFO queue), nothing preempted. Prints, per
workload, the median over seeds of each client's median wait and how many seeds put
the priority-1 client's median at or above the priority-2 client's.

    python3 docs/bench-results/demo-workload/model.py
"""
import heapq
import random
import statistics


def run(seed, p1, p2, span_ms, c=16, task_ms=5.0, fifo=False):
    """p1, p2: (tasks per job, ms between jobs, offset of the first job or None: random)."""
    rng = random.Random(seed)
    arrivals = []
    for cls, (tasks, interval, offset) in ((1, p1), (2, p2)):
        t = rng.uniform(0, interval) if offset is None else offset
        while t < span_ms:
            arrivals += [(t + rng.uniform(0, 0.2), cls) for _ in range(tasks)]
            t += interval
    arrivals.sort()
    free = [0.0] * c
    queue, waits, i = [], {1: [], 2: []}, 0

    def start(now):
        if fifo:
            pick = 0
        else:
            pick = next((n for n, (_, cls) in enumerate(queue) if cls == 1), 0)
        arrived, cls = queue.pop(pick)
        heapq.heapreplace(free, now + task_ms + rng.uniform(0, 0.3))
        waits[cls].append(now - arrived)

    while i < len(arrivals) or queue:
        if i < len(arrivals) and (arrivals[i][0] <= free[0] or not queue):
            now, cls = arrivals[i]
            i += 1
            queue.append((now, cls))
            while free[0] <= now and queue:
                start(now)
        else:
            start(free[0])
    return statistics.median(waits[1]), statistics.median(waits[2])


WORKLOADS = {
    # The old demo: both clients 12 tasks every 10 ms, priority 1's client 1 ms ahead...
    "old, priority 1 first": ((12, 10.0, 0.0), (12, 10.0, 1.0)),
    # ...or behind.
    "old, priority 2 first": ((12, 10.0, 1.0), (12, 10.0, 0.0)),
    # The demo now: interactive 2 tasks every 5 ms, batch 64 tasks every 35 ms.
    "interactive and batch": ((2, 5.0, None), (64, 35.0, 0.0)),
}

if __name__ == "__main__":
    for name, (p1, p2) in WORKLOADS.items():
        for fifo in (False, True):
            res = [run(seed, p1, p2, span_ms=50 * max(p1[1], p2[1]), fifo=fifo) for seed in range(40)]
            inverted = sum(1 for a, b in res if a >= b)
            print(
                f"{name:24} {'fifo' if fifo else 'priority':8} "
                f"p1 median {statistics.median(a for a, _ in res):6.2f} ms  "
                f"p2 median {statistics.median(b for _, b in res):6.2f} ms  "
                f"p1 at or behind p2 in {inverted}/40"
            )
