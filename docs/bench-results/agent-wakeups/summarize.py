"""Median two-level/one-level ratios of SW1's scheduling delay per arm, and the agents'
wake-ups and CPU time, from the sw1.jsonl files in this directory (or the one given).

An arm is a file name without its run number: `quiet-b-3.jsonl` is run 3 of `quiet-b`.
Pooled too: the alternated pairs of rounds b, c and d, each run of an arm that wakes the
agent (`head-b`, `stamped-c`, `stamped-d`) beside one that does not (`quiet-*`). The agent
CPU time of round c counts the program's load (the kernel verifies it on the agent's
thread); round d's counts the agent's loop only, as `bolt bench` records it now.
"""
import collections
import json
import pathlib
import statistics
import sys

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
runs = collections.defaultdict(list)
for f in sorted(here.glob("*.jsonl")):
    arm = f.stem.rsplit("-", 1)[0]
    rows = [json.loads(line) for line in f.open()]
    runs[arm].append(rows)
    pool = {"head-b": "waking", "stamped-c": "waking", "stamped-d": "waking"}.get(arm)
    if pool is None and arm in ("quiet-b", "quiet-c", "quiet-d"):
        pool = "quiet"
    if pool:
        runs[f"{pool} (pooled b, c, d)"].append(rows)


def ratio(rows, u, key):
    one = next(r for r in rows if r["level"] == "one-level" and r["utilization"] == u)
    two = next(r for r in rows if r["level"] == "two-level" and r["utilization"] == u)
    return two[key] / one[key], two


for arm, rs in sorted(runs.items()):
    print(f"{arm}: {len(rs)} runs")
    loads = sorted({r["utilization"] for r in rs[0]})
    for u in loads:
        p50 = [ratio(r, u, "p50_sched_delay_ms")[0] for r in rs]
        p99 = [ratio(r, u, "p99_sched_delay_ms")[0] for r in rs]
        twos = [ratio(r, u, "p50_sched_delay_ms")[1] for r in rs]
        wake = [t.get("agent_wakeups") for t in twos if t.get("agent_wakeups") is not None]
        cpu = [t.get("agent_cpu_ms") for t in twos if t.get("agent_cpu_ms") is not None]
        extra = ""
        if wake and "pooled" in arm:
            extra = f"  wake-ups {statistics.median(wake):.0f}"
        elif wake:
            extra = f"  wake-ups {statistics.median(wake):.0f}  agent CPU {statistics.median(cpu):.0f} ms"
        print(f"  {u * 100:3.0f} %  p50 {statistics.median(p50):.2f}  p99 {statistics.median(p99):.2f}{extra}")
