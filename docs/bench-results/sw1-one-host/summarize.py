"""SW1 with its 40 executors on one worker host and on two, alternated, and on one host
with the executors waiting at their host (the default) or at tier 2 (`--host-wait-ms 0`
for the testbed's agents), alternated: two-level over one-level per load (median over
the runs, and each run), from the committed sw1.jsonl.

    python3 docs/bench-results/sw1-one-host/summarize.py [RUN_DIR ...]

Given results directories of runs made with --task-records (their sw1_tasks.jsonl, about
100 MB each, are not committed), it also prints at 80 % load, per run and level: the
tasks that waited for a busy executor, how many tasks of their jobs found no idle
executor at the job's submission, and the start of the tasks for idle executors after
their ASSIGN reached the executor's host.
"""
import json
import pathlib
import statistics
import sys
from collections import defaultdict

here = pathlib.Path(__file__).parent


def ratios(arm):
    out = defaultdict(list)
    for f in sorted(here.glob(f"{arm}-[0-9].sw1.jsonl")):
        rows = [json.loads(x) for x in open(f)]
        one = {r["utilization"]: r for r in rows if r["level"] == "one-level"}
        two = {r["utilization"]: r for r in rows if r["level"] == "two-level"}
        for u in one:
            out[u].append(two[u]["p50_sched_delay_ms"] / one[u]["p50_sched_delay_ms"])
    return out


arms = {arm: ratios(arm) for arm in ("one-host", "two-hosts", "host-wait-default", "host-wait-0")}
print("| load | " + " | ".join(f"{a}: p50 two-level / one-level, median (runs)" for a in arms) + " |")
print("|---|" + "---|" * len(arms))
for u in sorted(arms["one-host"]):
    cells = [f"{statistics.median(r[u]):.2f} ({' '.join(f'{x:.2f}' for x in r[u])})" for r in arms.values()]
    print(f"| {u * 100:.0f} % | " + " | ".join(cells) + " |")


def q(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1))] if v else float("nan")


if len(sys.argv) > 1:
    print()
    print("| run | level | busy at submit | beyond the idle executors at their job's submission |"
          " idle at submit: ASSIGN at the host → start p50 / p90 (µs) |")
    print("|---|---|---:|---:|---:|")
for d in sys.argv[1:]:
    rs = [json.loads(x) for x in open(pathlib.Path(d) / "sw1_tasks.jsonl")]
    rs = [r for r in rs if r.get("utilization") == 0.8]
    for level in ("one-level", "two-level"):
        x = [r for r in rs if r["level"] == level]
        by_executor = defaultdict(list)
        for r in x:
            by_executor[(r["node"], r["executor"])].append(r)
        gaps, busy, idle_start = [], 0, []
        for runs in by_executor.values():
            runs.sort(key=lambda r: r["start_unix_ns"])
            gaps += [(a["start_unix_ns"] + a["run_ns"], b["start_unix_ns"]) for a, b in zip(runs, runs[1:])]
            end = None
            for r in runs:
                if end is not None and end > r["first_sent_unix_ns"]:
                    busy += 1
                elif r["arrived_unix_ns"]:
                    idle_start.append((r["start_unix_ns"] - r["arrived_unix_ns"]) / 1e3)
                end = r["start_unix_ns"] + r["run_ns"]
        jobs = defaultdict(list)
        for r in x:
            jobs[(r["uid"], r["jid"])].append(r)
        beyond = 0
        for tasks in jobs.values():
            t = min(r["first_sent_unix_ns"] for r in tasks)
            idle = sum(1 for e, s in gaps if e <= t < s)
            beyond += max(0, len(tasks) - idle)
        print(f"| {d} | {level} | {busy} | {beyond} | {q(idle_start, .5):.0f} / {q(idle_start, .9):.0f} |")
