"""SW1's tail against the interval between a client's jobs, from `bolt bench all --only
sw1 --task-records` (its sw1_tasks.jsonl). For each job: the interval since the same
client's job before, and the longest delay (first send -> ASSIGN arrival) of its tasks;
the jobs are bucketed by that interval, 250 us wide, and the median of their longest
delays is printed per bucket (buckets of fewer than 10 jobs left out).

    python3 docs/bench-results/sim-validate-late/interval.py DIR/sw1_tasks.jsonl one-level
"""
import collections, json, sys

level = sys.argv[2] if len(sys.argv) > 2 else 'one-level'
jobs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t['level'] == level:
        jobs[(t['utilization'], t['uid'], t['jid'])].append(t)
by_client = collections.defaultdict(list)
for (u, uid, _), tasks in jobs.items():
    sent = min(t['first_sent_unix_ns'] for t in tasks)
    longest = max(t['arrived_unix_ns'] - t['first_sent_unix_ns'] for t in tasks)
    by_client[(u, uid)].append((sent, longest))
for u in sorted({u for u, _ in by_client}):
    buckets = collections.defaultdict(list)
    for (uu, _), js in by_client.items():
        if uu != u:
            continue
        js.sort()
        for (a, _), (b, longest) in zip(js, js[1:]):
            buckets[(b - a) // 250_000].append(longest / 1e3)
    row = []
    for k in sorted(buckets):
        d = sorted(buckets[k])
        if len(d) >= 10:
            row.append(f"{k * 250}-{k * 250 + 250} us: {len(d)} jobs, {d[len(d) // 2]:.0f} us")
    print(f"{u:.0%}", ' | '.join(row))
