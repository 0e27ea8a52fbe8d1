"""How much of each SW1 point's slowest 1 % of tasks overlaps a stall the run found.

Usage: python3 tail_in_stalls.py RESULTS_DIR
RESULTS_DIR: a `bolt bench all --only sw1 --task-records` results directory (its
sw1.jsonl, whose executor_threads.stalls are offsets from the point's first send, and
sw1_tasks.jsonl). A task overlaps a stall if the stall intersects its first send → start.
"""
import json
import sys
from collections import defaultdict

d = sys.argv[1]
lines = [json.loads(l) for l in open(d + "/sw1.jsonl")]
by_point = defaultdict(list)
for l in open(d + "/sw1_tasks.jsonl"):
    t = json.loads(l)
    by_point[(t["level"], t["utilization"])].append(t)

for line in lines:
    key = (line["level"], line["utilization"])
    tasks = by_point[key]
    if not tasks:
        continue
    t0 = min(t["first_sent_unix_ns"] for t in tasks)
    stalls = [(t0 + s["at_ns"], t0 + s["at_ns"] + s["len_ns"]) for s in line["executor_threads"].get("stalls", [])]

    def overlaps(t, slack_ns=0):
        a, b = t["first_sent_unix_ns"], t["start_unix_ns"]
        return any(a < e + slack_ns and b > s - slack_ns for s, e in stalls)

    ordered = sorted(tasks, key=lambda t: t["start_unix_ns"] - t["first_sent_unix_ns"])
    tail = ordered[int(len(ordered) * 0.99):]
    print(
        "%s %3.0f %%: p99 %.2f ms, %d stalls (%.0f ms); of the slowest %d tasks %d overlap a stall, %d are within 10 ms of one; %.1f %% of all tasks overlap one"
        % (
            key[0], key[1] * 100, line["p99_sched_delay_ms"], len(stalls),
            sum(e - s for s, e in stalls) / 1e6, len(tail),
            sum(overlaps(t) for t in tail), sum(overlaps(t, 10_000_000) for t in tail),
            100 * sum(overlaps(t) for t in tasks) / len(tasks),
        )
    )
