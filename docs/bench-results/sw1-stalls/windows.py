"""Where the tail of a `bolt bench sw1 --task-records` run is: per level and utilisation
up to 80 %, the jobs whose median scheduling delay exceeded 1 ms, and the windows of
consecutive such jobs spanning 5 ms or more (start in ms from the run's first send, +
its length): machine-wide stalls, in which the clients' own sends come late too.

    target/release/bolt bench all --only sw1 --task-records --out DIR
    python3 docs/bench-results/sw1-stalls/windows.py DIR/sw1_tasks.jsonl
"""
import collections
import json
import statistics
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    t = json.loads(line)
    runs[(t["level"], t["utilization"])][(t["uid"], t["jid"])].append(t)

for (level, u), jobs in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    if u > 0.8:
        continue  # above 80 % queueing, not stalls, makes the slow jobs
    jobs = sorted(jobs.values(), key=lambda tasks: min(t["first_sent_unix_ns"] for t in tasks))
    t0 = min(t["first_sent_unix_ns"] for t in jobs[0])
    delays = sorted(t["start_unix_ns"] - t["first_sent_unix_ns"] for tasks in jobs for t in tasks)
    p99 = delays[int(0.99 * len(delays))]
    windows, current, slow = [], None, 0
    for tasks in jobs:
        sent = (min(t["first_sent_unix_ns"] for t in tasks) - t0) / 1e6
        if statistics.median(t["start_unix_ns"] - t["first_sent_unix_ns"] for t in tasks) > 1e6:
            slow += 1
            current = [sent, sent] if current is None else [current[0], sent]
        elif current is not None:
            windows.append(current)
            current = None
    if current is not None:
        windows.append(current)
    stalls = [(a, b) for a, b in windows if b - a >= 5]
    print(
        f"{level:9} {u * 100:3.0f} %  p99 {p99 / 1e6:5.2f} ms  jobs {len(jobs)}, slow {slow:3d}, windows of 5 ms+: "
        + ", ".join(f"{a:.0f}+{b - a:.0f}" for a, b in stalls)
    )
