"""How soon a task another host gave back starts once its executor frees, from task records.

Usage: python3 recalled_after_freed.py UTILISATION DIR [DIR ...]
Each DIR: a `bolt bench all --only sw1 --task-records` results directory (its
sw1_tasks.jsonl, with the switch's sends of each task). For each DIR, two-level at
UTILISATION, every round:
- sent again: tasks the switch sent more than once (a host RETURNed them, here nearly
  always for a RECALL), as a share of the point's tasks;
- of those sent first before the executor that ran them freed (they waited for an
  executor somewhere), the time from that executor freeing to the task's start: p50,
  p90, p99;
- the same for the tasks sent once (served where they were first sent).
An executor frees when its previous task ends (start + run time).
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import mark_executor_freed  # noqa: E402


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


utilisation = sys.argv[1]
for run in sys.argv[2:]:
    tasks = []
    with open(f"{run}/sw1_tasks.jsonl") as f:
        for line in f:
            t = json.loads(line)
            if t["level"] == "two-level" and f"{t['utilization']}" == utilisation:
                tasks.append(t)
    mark_executor_freed(tasks)

    def after_freed(sent_again):
        return [
            (t["start_unix_ns"] - t["freed"]) / 1e3
            for t in tasks
            if t["freed"] and (t["switch_sends"] >= 2) == sent_again and t["switch_sent_unix_ns"] < t["freed"]
        ]

    again = after_freed(True)
    once = after_freed(False)
    share = sum(t["switch_sends"] >= 2 for t in tasks) / max(1, len(tasks))
    print(
        f"{run}: sent again {share * 100:.1f} %; start after the executor freed, us: "
        f"sent again p50 {quantile(again, 0.5):.0f} p90 {quantile(again, 0.9):.0f} p99 {quantile(again, 0.99):.0f}"
        f" (n={len(again)}); sent once p50 {quantile(once, 0.5):.0f} p90 {quantile(once, 0.9):.0f}"
        f" p99 {quantile(once, 0.99):.0f} (n={len(once)})"
    )
