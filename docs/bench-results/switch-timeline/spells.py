"""Writes a copy of a `bolt bench all --only sw1 --task-records` run whose sw1.jsonl
carries slow spells found with a chosen window and factor, for `bolt sim validate
--testbed` to replay (the sensitivity of `calibrate::slow_spells`'s 10 ms and 4x).

A window is slow when at least three tasks reached their executors in it and their
median wait (start - arrival) is FACTOR times the run's median or more; adjacent slow
windows join. The copy's trace.jsonl is empty (SW1 points only).

    python3 docs/bench-results/switch-timeline/spells.py RUN_DIR OUT_DIR WINDOW_MS FACTOR
"""
import collections
import json
import os
import sys


def main(src, dst, window_ms, factor):
    window = int(window_ms * 1e6)
    tasks = collections.defaultdict(list)
    for line in open(os.path.join(src, "sw1_tasks.jsonl")):
        r = json.loads(line)
        tasks[(r["level"], r["utilization"])].append(r)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "sw1.jsonl"), "w") as out:
        for line in open(os.path.join(src, "sw1.jsonl")):
            d = json.loads(line)
            rs = tasks[(d["level"], d["utilization"])]
            first = min(r["first_sent_unix_ns"] for r in rs)
            waits = [(r["arrived_unix_ns"], r["start_unix_ns"]) for r in rs
                     if r["arrived_unix_ns"] > 0 and r["start_unix_ns"] >= r["arrived_unix_ns"]]
            median = sorted(s - a for a, s in waits)[len(waits) // 2]
            by_window = collections.defaultdict(list)
            for a, s in waits:
                by_window[max(0, a - first) // window].append(s - a)
            spells = []
            for k in sorted(by_window):
                w = sorted(by_window[k])
                if len(w) < 3 or w[len(w) // 2] < max(1, median * factor):
                    continue
                start, end = first + k * window, first + (k + 1) * window
                if spells and spells[-1][1] == start:
                    spells[-1][1] = end
                else:
                    spells.append([start, end])
            d["executor_threads"]["spells"] = [{"at_ns": s - first, "len_ns": e - s} for s, e in spells]
            d["executor_threads"]["spell_span_ns"] = max(a for a, _ in waits) - first
            out.write(json.dumps(d) + "\n")
    open(os.path.join(dst, "trace.jsonl"), "w").close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
