"""The agents' wake-ups, CPU time and tasks RETURNed per SW1 point of two-level, per run
(the mean of its rounds; RETURNed summed), from the `sw1.jsonl` of each run directory.

    python3 docs/bench-results/recall-into-rings/agents.py [DIR]
"""
import json
import pathlib
import sys
from collections import defaultdict

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
for run in sorted(p for p in here.iterdir() if (p / "sw1.jsonl").exists()):
    points = defaultdict(list)
    for line in open(run / "sw1.jsonl"):
        x = json.loads(line)
        if x.get("level") == "two-level":
            points[x["utilization"]].append(x)
    cells = []
    for u, xs in sorted(points.items()):
        wakeups = sum(x["agent_wakeups"] for x in xs) / len(xs)
        cpu = sum(x["agent_cpu_ms"] for x in xs) / len(xs)
        returned = sum(x["tier1_returned"] for x in xs)
        cells.append(f"{u:.0%} {wakeups:,.0f} / {cpu:.0f} ms / {returned}")
    print(run.name + ": " + " | ".join(cells))
