"""Where an SW1 task's time goes before its start, from task records: from its first
send to the ASSIGN's arrival at its executor's network stack ("to the host"), and from
that arrival to the start ("on the host"), for the slowest 1 % and for every task, and
the time on the host by the order in which a job's tasks arrived.

    python3 docs/bench-results/sw1-host-start/host_start.py LOAD RECORDS.jsonl ...

LOAD is the utilisation (0.6 for 60 %); each file is a run's `sw1_tasks.jsonl`. With
LOAD `all`, it prints two-level's p50 and p99 delay over one-level's at every load, over
every task of the files.
"""
import json
import pathlib
import sys
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import quantile as pct  # noqa: E402


if sys.argv[1] == "all":
    delays = defaultdict(list)
    for path in sys.argv[2:]:
        for line in open(path):
            t = json.loads(line)
            delays[(t["utilization"], t["level"])].append(t["start_unix_ns"] - t["first_sent_unix_ns"])
    for u in sorted({u for u, _ in delays}):
        two, one = delays[(u, "two-level")], delays[(u, "one-level")]
        print(f"{u:.0%}: p50 {pct(two, .5) / pct(one, .5):.2f}, p99 {pct(two, .99) / pct(one, .99):.2f}")
    sys.exit(0)

load = float(sys.argv[1])
by_level = defaultdict(list)
for run, path in enumerate(sys.argv[2:]):
    for line in open(path):
        t = json.loads(line)
        if abs(t["utilization"] - load) < 1e-6 and t["arrived_unix_ns"]:
            t["run"] = run
            by_level[t["level"]].append(t)

for level, tasks in sorted(by_level.items()):
    jobs = defaultdict(list)
    for t in tasks:
        t["delay"] = (t["start_unix_ns"] - t["first_sent_unix_ns"]) / 1e3
        t["to_host"] = (t["arrived_unix_ns"] - t["first_sent_unix_ns"]) / 1e3
        t["on_host"] = (t["start_unix_ns"] - t["arrived_unix_ns"]) / 1e3
        jobs[(t["run"], t.get("round", 1), t["uid"], t["jid"])].append(t)
    for job in jobs.values():
        job.sort(key=lambda t: t["arrived_unix_ns"])
        for rank, t in enumerate(job):
            t["rank"] = rank
    p99 = pct([t["delay"] for t in tasks], 0.99)
    print(f"{level} at {load:.0%}: {len(tasks)} tasks, delay p50 {pct([t['delay'] for t in tasks], .5):.0f} us, p99 {p99:.0f} us")
    for name, sel in (("slowest 1 %", [t for t in tasks if t["delay"] >= p99]), ("every task", tasks)):
        for f in ("to_host", "on_host"):
            v = [t[f] for t in sel]
            print(f"  {name:11s} {f:8s} p10 {pct(v, .1):6.0f}  p50 {pct(v, .5):6.0f}  p90 {pct(v, .9):6.0f} us")
    ranks = defaultdict(list)
    for t in tasks:
        ranks[t["rank"]].append(t["on_host"])
    print("  on the host by arrival in its job, p50/p90 us:", " ".join(f"{r}:{pct(v, .5):.0f}/{pct(v, .9):.0f}" for r, v in sorted(ranks.items())))
