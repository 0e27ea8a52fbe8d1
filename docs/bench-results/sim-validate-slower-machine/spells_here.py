"""Whether a run's slow spells (`calibrate::slow_spells`, recorded in sw1.jsonl) are
where its SW1 tail is, and whether the machine stalled in them as a whole, from
`bolt bench all --only sw1 --task-records` (sw1.jsonl and sw1_tasks.jsonl in DIR).

Per level and utilisation up to 95 %:
  cover        the share of the run the spells cover
  p99 in       how many of the tasks at or above the p99 delay reached their
               executors in a spell
  late in/out  the share of jobs sent more than 7 ms after the job before (the two
               clients' jobs are 5 ms apart), in spells and outside: a stall of the
               whole machine holds the clients' sends back as well

    python3 docs/bench-results/sim-validate-slower-machine/spells_here.py DIR
"""
import collections
import json
import os
import sys

LATE_GAP_MS = 7.0


def main(directory):
    tasks = collections.defaultdict(list)
    with open(os.path.join(directory, "sw1_tasks.jsonl")) as f:
        for line in f:
            t = json.loads(line)
            tasks[(t["level"], t["utilization"])].append(t)
    spells, cover = {}, {}
    with open(os.path.join(directory, "sw1.jsonl")) as f:
        for line in f:
            p = json.loads(line)
            threads = p["executor_threads"]
            key = (p["level"], p["utilization"])
            spells[key] = [(s["at_ns"], s["at_ns"] + s["len_ns"]) for s in threads.get("spells", [])]
            cover[key] = sum(b - a for a, b in spells[key]) / max(1, threads.get("spell_span_ns", 0))
    print("| level | load | cover | p99 tasks in spells | jobs late in spells | jobs late outside |")
    print("|---|---:|---:|---:|---:|---:|")
    for key in sorted(tasks):
        if key[1] > 0.95 or key not in spells:
            continue
        run = tasks[key]
        first = min(t["first_sent_unix_ns"] for t in run)

        def in_spell(at):
            return any(a <= at - first < b for a, b in spells[key])

        by_delay = sorted(run, key=lambda t: t["start_unix_ns"] - t["first_sent_unix_ns"])
        tail = by_delay[int(len(by_delay) * 0.99):]
        tail_in = sum(1 for t in tail if in_spell(t["arrived_unix_ns"]))
        sends = sorted({t["first_sent_unix_ns"] for t in run})
        gaps = [(b, (b - a) / 1e6) for a, b in zip(sends, sends[1:])]
        inside = [g for at, g in gaps if in_spell(at)]
        outside = [g for at, g in gaps if not in_spell(at)]

        def late(v):
            return f"{sum(g > LATE_GAP_MS for g in v)} of {len(v)}"

        print(f"| {key[0]} | {key[1] * 100:.0f} % | {cover[key] * 100:.1f} % | {tail_in} of {len(tail)} | {late(inside)} | {late(outside)} |")


if __name__ == "__main__":
    main(sys.argv[1])
