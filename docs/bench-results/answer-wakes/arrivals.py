"""Writes arrivals.jsonl from SW1 task records (`bolt bench all --only sw1 --task-records`):
per run, level and load, the median over jobs of the time from the job's first send to
the arrival at its host of its k-th task (k = 1 .. tasks per job).

    python3 arrivals.py BUILD=DIR[,DIR...] ... > arrivals.jsonl
"""
import collections
import json
import statistics
import sys

for arg in sys.argv[1:]:
    build, dirs = arg.split("=")
    for run, d in enumerate(dirs.split(","), 1):
        jobs = collections.defaultdict(list)
        for line in open(f"{d}/sw1_tasks.jsonl"):
            r = json.loads(line)
            if r["arrived_unix_ns"]:
                key = (r["level"], r["utilization"], r["uid"], r["jid"])
                jobs[key].append((r["arrived_unix_ns"] - r["first_sent_unix_ns"]) / 1e3)
        per = collections.defaultdict(lambda: collections.defaultdict(list))
        for (level, u, _, _), v in jobs.items():
            for k, x in enumerate(sorted(v)):
                per[(level, u)][k].append(x)
        for (level, u), ks in sorted(per.items()):
            n = max(ks)
            kth = [round(statistics.median(ks[k]), 1) for k in range(n + 1)]
            print(json.dumps({"build": build, "run": run, "level": level, "utilization": u, "kth_us": kth}))
