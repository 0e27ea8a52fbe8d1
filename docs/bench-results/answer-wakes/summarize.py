"""Tables of docs/benchmarks.md, "The answer to waiting executors wakes nobody", from the
JSON lines in this directory: `<build>-<n>.sw1.jsonl` (SW1), `<build>-<n>.priority.jsonl`,
`<build>-<n>.trace.jsonl`, and `arrivals.jsonl` (per run, level and load, the median
time from a job's first send to the arrival at its host of its k-th task, from the
runs' task records, written by arrivals.py). `never/` holds the diagnostic build whose
answers woke the agent never, with the runs alternated with it.

    python3 docs/bench-results/answer-wakes/summarize.py [DIR]
"""
import collections
import json
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import all_tasks  # noqa: E402

here = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent
LOADS = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]


def lines(path):
    return [json.loads(x) for x in open(path)]


def builds(suffix):
    runs = collections.defaultdict(list)
    for f in sorted(here.glob(f"*.{suffix}.jsonl")):
        runs[f.name.split(".")[0].rsplit("-", 1)[0]].append(f)
    return runs


print("SW1, two-level over one-level: median of the runs [each run]")
for build, files in builds("sw1").items():
    for key in ("p50_sched_delay_ms", "p99_sched_delay_ms"):
        cells = []
        for u in LOADS:
            r = []
            for f in files:
                ls = lines(f)
                one = next(x for x in ls if x["level"] == "one-level" and x["utilization"] == u)
                two = next(x for x in ls if x["level"] == "two-level" and x["utilization"] == u)
                r.append(two[key] / one[key])
            cells.append(f"{statistics.median(r):.2f} [{' '.join(f'{x:.2f}' for x in r)}]")
        print(f"  {build} {key[:3]}: " + " | ".join(f"{int(u * 100)}% {c}" for u, c in zip(LOADS, cells)))
    for key in ("xdp_share", "agent_wakeups", "agent_cpu_ms"):
        per = []
        for u in LOADS:
            v = [next(x for x in lines(f) if x["level"] == "two-level" and x["utilization"] == u)[key] for f in files]
            per.append(f"{int(u * 100)}% {statistics.median(v):.3g}")
        print(f"  {build} {key}: " + " | ".join(per))

print("\nPriority, per-level queueing medians (ms) and two-level over one-level")
for build, files in builds("priority").items():
    for f in files:
        ls = [x for x in lines(f) if x["mode"] == "priorities"]
        med = {(x["level"], x["priority"]): x["queue_ms"]["p50"] for x in ls}
        p99 = {(x["level"], x["priority"]): x["queue_ms"]["p99"] for x in ls}
        share = next(x["xdp_share"] for x in ls if x["level"] == "two-level")
        ret = next(x["tier1_returned"] for x in ls if x["level"] == "two-level")
        out = []
        for level in ("one-level", "two-level"):
            m = [med[(level, p)] for p in (1, 2, 3, 4)]
            ordered = all(a <= b for a, b in zip(m, m[1:]))
            out.append(f"{level} " + " / ".join(f"{x:.2f}" for x in m) + (" ordered" if ordered else " NOT ordered"))
        out.append("p50 " + " / ".join(f"{med[('two-level', p)] / med[('one-level', p)]:.2f}" for p in (1, 2, 3, 4)))
        out.append("p99 " + " / ".join(f"{p99[('two-level', p)] / p99[('one-level', p)]:.2f}" for p in (1, 2, 3, 4)))
        out.append(f"XDP {100 * share:.1f} % returned {ret}")
        overall = [all_tasks(ls, "two-level", q) / all_tasks(ls, "one-level", q) for q in (0.5, 0.99)]
        out.append(f"all tasks p50 {overall[0]:.2f} p99 {overall[1]:.2f}")
        print(f"  {f.name.split('.')[0]}: " + " | ".join(out))

print("\nTrace (sleep), two-level over one-level")
for build, files in builds("trace").items():
    for f in files:
        s = [x for x in lines(f) if x.get("kind") == "summary" and x["work"] == "sleep"]
        one = next(x for x in s if x["level"] == "one-level")
        two = next(x for x in s if x["level"] == "two-level")
        r50 = two["sched_delay_ms"]["p50"] / one["sched_delay_ms"]["p50"]
        r99 = two["sched_delay_ms"]["p99"] / one["sched_delay_ms"]["p99"]
        print(f"  {f.name.split('.')[0]}: p50 {r50:.2f} p99 {r99:.2f} XDP {100 * two['xdp_share']:.1f} %")

arrivals = here / "arrivals.jsonl"
if arrivals.exists():
    print("\nSW1 70 %: a job's k-th task at its host, µs after the job's first send (median over jobs; median of runs)")
    rows = [x for x in lines(arrivals) if x["utilization"] == 0.7]
    for build in sorted({x["build"] for x in rows}):
        for level in ("one-level", "two-level"):
            ks = [x["kth_us"] for x in rows if x["build"] == build and x["level"] == level]
            cols = [statistics.median(k[i] for k in ks) for i in range(min(len(k) for k in ks))]
            print(f"  {build} {level}: " + " ".join(f"{i + 1}:{c:.0f}" for i, c in enumerate(cols)))
