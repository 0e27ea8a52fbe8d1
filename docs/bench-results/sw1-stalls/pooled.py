"""SW1's scheduling delay pooled over several runs: every task of every run, per point.

Usage: python3 pooled.py NAME=DIR,DIR,... [NAME=DIR,...]
Each DIR: a `bolt bench all --only sw1 --task-records` results directory (its
sw1_tasks.jsonl). One run's p99 at a point rests on its slowest 40 to 160 tasks, most of
them from two or three stalls, so it moves by factors of 2 from run to run; pooled, the
runs' tails weigh alike. Prints, per utilisation and group, the pooled one-level and
two-level p50 / p99 (ms) and each run's two-level p99.
"""
import json
import sys
from collections import defaultdict


def quantile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


groups = {}
for arg in sys.argv[1:]:
    name, dirs = arg.split("=", 1)
    groups[name] = dirs.split(",")

results = {}
for name, dirs in groups.items():
    pooled, per_run = defaultdict(list), defaultdict(list)
    for d in dirs:
        delays = defaultdict(list)
        for line in open(d + "/sw1_tasks.jsonl"):
            t = json.loads(line)
            delays[(t["utilization"], t["level"])].append((t["start_unix_ns"] - t["first_sent_unix_ns"]) / 1e6)
        for key, v in delays.items():
            pooled[key] += v
            per_run[key].append(quantile(v, 0.99))
    results[name] = (pooled, per_run)

print("| utilisation | " + " | ".join(f"{g}: one-level p50 / p99 | two-level p50 / p99 | two-level p99 per run" for g in groups) + " |")
print("|---" * (1 + 3 * len(groups)) + "|")
for u in sorted({k[0] for pooled, _ in results.values() for k in pooled}):
    cells = []
    for pooled, per_run in results.values():
        one, two = pooled[(u, "one-level")], pooled[(u, "two-level")]
        cells.append(f"{quantile(one, .5):.3f} / {quantile(one, .99):.2f}")
        cells.append(f"{quantile(two, .5):.3f} / {quantile(two, .99):.2f}")
        cells.append(", ".join(f"{x:.1f}" for x in per_run[(u, "two-level")]))
    print(f"| {u * 100:.0f} % | " + " | ".join(cells) + " |")
