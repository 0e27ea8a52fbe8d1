"""Where SW1's delay before the executor goes, from `bolt bench all --only sw1
--task-records` (sw1_tasks.jsonl, with the software switch's stamps).

For each level and utilisation: the delay from the client's first send to the ASSIGN's
arrival at the executor's host (p50 / p99), split into
  to switch  first send -> the SUBMIT's arrival stamp at the switch's host
  wait       arrival -> the switch thread's receive returning with it
  handle     receive returned -> tier 2 done with the SUBMIT (and the messages before
             it in its receive batch)
  to flush   handled -> the flush that sent the task called
  in flush   flush called -> the task's arrival at its executor (delivered inside the
             sendmmsg, after the datagrams before it)
and the same parts' means over the tasks at or above the p99, whose SUBMIT was stamped
(the first datagram of its receive). Two-level tasks go to the agent in a REFILL and
from there to an executor, so their "in flush" holds the host's part too.

    python3 docs/bench-results/switch-timeline/split.py DIR/sw1_tasks.jsonl
"""
import collections
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import quantile as q  # noqa: E402


PARTS = [
    ("to switch", "first_sent_unix_ns", "switch_arrived_unix_ns"),
    ("wait", "switch_arrived_unix_ns", "switch_taken_unix_ns"),
    ("handle", "switch_taken_unix_ns", "switch_handled_unix_ns"),
    ("to flush", "switch_handled_unix_ns", "switch_flush_called_unix_ns"),
    ("in flush", "switch_flush_called_unix_ns", "arrived_unix_ns"),
]


def main(path):
    rows = [json.loads(line) for line in open(path)]
    by_point = collections.defaultdict(list)
    for r in rows:
        by_point[(r["level"], r["utilization"])].append(r)
    print("| level | load | before p50 / p99 (µs) | " + " | ".join(f"{n} p50 / p99" for n, _, _ in PARTS)
          + " | tail tasks | tail means: " + ", ".join(n for n, _, _ in PARTS) + " |")
    print("|---|---:|---:|" + "---:|" * len(PARTS) + "---:|---|")
    for (level, load), rs in sorted(by_point.items()):
        rs = [r for r in rs if r["arrived_unix_ns"] and r["switch_taken_unix_ns"] and r["switch_flush_called_unix_ns"]]
        stamped = [r for r in rs if r["switch_arrived_unix_ns"]]
        before = [r["arrived_unix_ns"] - r["first_sent_unix_ns"] for r in rs]
        p99 = q(before, 0.99)
        cells = []
        for _, a, b in PARTS:
            src = stamped if "switch_arrived_unix_ns" in (a, b) else rs
            d = [r[b] - r[a] for r in src]
            cells.append(f"{q(d, 0.5) / 1e3:.0f} / {q(d, 0.99) / 1e3:.0f}")
        tail = [r for r in stamped if r["arrived_unix_ns"] - r["first_sent_unix_ns"] >= p99]
        means = [sum(r[b] - r[a] for r in tail) / len(tail) / 1e3 if tail else float("nan") for _, a, b in PARTS]
        print(f"| {level} | {load * 100:.0f} % | {q(before, 0.5) / 1e3:.0f} / {p99 / 1e3:.0f} | " + " | ".join(cells)
              + f" | {len(tail)} | " + ", ".join(f"{m:.0f}" for m in means) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
