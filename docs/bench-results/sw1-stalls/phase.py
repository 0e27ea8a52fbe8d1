"""The two SW1 clients' phase in a `bolt bench sw1 --task-records` run: per level and
utilisation, the median offset (mod the 10-ms job interval) between the clients' k-th
job sends, beside the median scheduling delay.

    python3 docs/bench-results/sw1-stalls/phase.py DIR/sw1_tasks.jsonl
"""
import collections
import json
import statistics
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    t = json.loads(line)
    runs[(t["level"], t["utilization"])][t["uid"]].append(t)

for (level, u), clients in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    sends = []
    for tasks in clients.values():
        jobs = collections.defaultdict(list)
        for t in tasks:
            jobs[t["jid"]].append(t["first_sent_unix_ns"])
        sends.append(sorted(min(v) for v in jobs.values()))
    if len(sends) != 2:
        continue
    a, b = sends
    offset = statistics.median(((b[i] - a[i]) / 1e6) % 10 for i in range(min(len(a), len(b))))
    delays = sorted(t["start_unix_ns"] - t["first_sent_unix_ns"] for ts in clients.values() for t in ts)
    print(f"{level:9} {u * 100:3.0f} %  clients {offset:5.2f} ms apart (mod 10)  p50 {delays[len(delays) // 2] / 1e6:.3f} ms")
