"""Tables of docs/benchmarks.md, "SW1, trace and priority in rounds", from the JSON lines
in this directory: one directory per `bolt bench all --rounds N` run, each with the
run's per-round lines (`<experiment>.jsonl`) and its pooled lines
(`<experiment>_pooled.jsonl`). `base-*`: the build of feefdd1; the variants of RECALL
measured against it, not kept: `surplus-*` (a ring's heads beyond a round trip of its
drain go at any age), `age1-*` (minimum age 1 ms), `recall8-*` (8 RECALLs per waiting
host), `combo-*` (the surplus, 8 RECALLs, and a replaced REFILL_REQ recalling for the
executors it adds). Alternated: surplus-3rounds-N with base-3rounds-N (N = 1, 2), age1
with base-3rounds-3, recall8 with base-3rounds-4, combo with base-3rounds-5. `sends-2rounds`: the build that counts the
switch's sends of a task in the task records (same agent and switch as base).

    python3 docs/bench-results/sw1-rounds/summarize.py [DIR]
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import all_tasks  # noqa: E402

here = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent


def lines(path):
    return [json.loads(x) for x in open(path)] if path.exists() else []


print("SW1, pooled: two-level over one-level p50 / p99 [two-level p99 ms, one-level p99 ms]")
for run in sorted(p for p in here.iterdir() if (p / "sw1_pooled.jsonl").exists()):
    pooled = lines(run / "sw1_pooled.jsonl")
    rounds = pooled[0]["rounds"]
    cells = []
    for u in sorted({x["utilization"] for x in pooled}):
        one = next(x for x in pooled if x["utilization"] == u and x["level"] == "one-level")
        two = next(x for x in pooled if x["utilization"] == u and x["level"] == "two-level")
        cells.append(
            f"{u * 100:.0f}% {two['p50_sched_delay_ms'] / one['p50_sched_delay_ms']:.2f} / "
            f"{two['p99_sched_delay_ms'] / one['p99_sched_delay_ms']:.2f} "
            f"[{two['p99_sched_delay_ms']:.2f}, {one['p99_sched_delay_ms']:.2f}]"
        )
    print(f"  {run.name} ({rounds} rounds): " + " | ".join(cells))

for run in sorted(p for p in here.iterdir() if (p / "trace_pooled.jsonl").exists()):
    pooled = lines(run / "trace_pooled.jsonl")
    print(f"\nTrace, pooled ({run.name}, {pooled[0]['rounds']} rounds): two-level over one-level")
    for work in ("spin", "sleep"):
        one = next(x for x in pooled if x["work"] == work and x["level"] == "one-level")
        two = next(x for x in pooled if x["work"] == work and x["level"] == "two-level")
        s1, s2 = one["sched_delay_ms"], two["sched_delay_ms"]
        g1, g2 = one["get_rtt_ms"], two["get_rtt_ms"]
        print(
            f"  {work}: sched. delay p50 {s2['p50']:.3f} / {s1['p50']:.3f} ms ({s2['p50'] / s1['p50']:.2f}), "
            f"p99 {s2['p99']:.1f} / {s1['p99']:.1f} ms ({s2['p99'] / s1['p99']:.2f}); "
            f"GET_TASK round trip p50 {g2['p50'] * 1e3:.0f} / {g1['p50'] * 1e3:.0f} us"
        )
    per_round = [x for x in lines(run / "trace.jsonl") if x.get("kind") == "summary" and x["level"] == "two-level"]
    print("  XDP share per round: " + ", ".join(f"{x['work']} {x['xdp_share'] * 100:.1f} %" for x in per_round))

for run in sorted(p for p in here.iterdir() if (p / "priority_pooled.jsonl").exists()):
    pooled = [x for x in lines(run / "priority_pooled.jsonl") if x["mode"] == "priorities"]
    print(f"\nPriority, pooled ({run.name}, {pooled[0]['rounds']} rounds): queueing p50 / p99 ms, two-level over one-level")
    for p in (1, 2, 3, 4):
        one = next(x for x in pooled if x["priority"] == p and x["level"] == "one-level")
        two = next(x for x in pooled if x["priority"] == p and x["level"] == "two-level")
        q1, q2 = one["queue_ms"], two["queue_ms"]
        print(
            f"  level {p} ({one['tasks']} tasks): {q2['p50']:.2f} / {q1['p50']:.2f} ({q2['p50'] / q1['p50']:.2f}), "
            f"p99 {q2['p99']:.1f} / {q1['p99']:.1f} ({q2['p99'] / q1['p99']:.2f}); "
            f"GET_TASK p50 {two['get_rtt_us']['p50']:.0f} / {one['get_rtt_us']['p50']:.0f} us; "
            f"started over a waiting higher level {two['started_over_higher']} / {one['started_over_higher']}"
        )
    for q in (0.5, 0.99):
        one, two = (all_tasks(pooled, level, q) for level in ("one-level", "two-level"))
        print(f"  every task, queueing p{round(q * 100)}: {two:.2f} / {one:.2f} ms ({two / one:.2f})")
    per_round = [x for x in lines(run / "priority.jsonl") if x["level"] == "two-level" and x["mode"] == "priorities"]
    shares = sorted({(x["round"], x["xdp_share"]) for x in per_round})
    print("  XDP share per round: " + ", ".join(f"{s * 100:.1f} %" for _, s in shares))
