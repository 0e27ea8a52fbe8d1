"""What SW1's slowest 1 % of tasks waited for, at one utilisation, from task records.

Usage: python3 late_arrivals.py UTILISATION DIR [DIR ...]
Each DIR: a `bolt bench all --only sw1 --task-records` results directory (its
sw1_tasks.jsonl; a point's rounds are read together, as `bolt bench records` does). Per
level, every task of the DIRs at UTILISATION pooled; of the slowest 1 %:
- idle at submit: its executor's previous task had ended before the task was sent;
- picked up at once: its executor was busy and started it within 100 us of freeing;
- arrived late: its executor was busy, and the task reached that executor's host more
  than 50 us after the executor freed (it was elsewhere meanwhile: at tier 2, or in the
  other host's rings until a RECALL or a thief took it back);
- other.
For the late ones: the median time from the executor freeing to the task's arrival, and
from the switch's first send of the task (its first REFILL, to whichever host) to the
executor freeing; and, in records that count the switch's sends of a task, how many
were sent on more than once (a host RETURNed them) and when their last send left, from
the executor's freeing.
"""
import json
import pathlib
import statistics
import sys
from collections import Counter

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import mark_executor_freed  # noqa: E402

utilisation = float(sys.argv[1])
for level in ("one-level", "two-level"):
    tasks = []
    for d in sys.argv[2:]:
        mine = []
        for line in open(d + "/sw1_tasks.jsonl"):
            t = json.loads(line)
            if t["utilization"] == utilisation and t["level"] == level:
                mine.append(t)
        mark_executor_freed(mine)
        tasks += mine
    tasks.sort(key=lambda t: t["start_unix_ns"] - t["first_sent_unix_ns"])
    slowest = tasks[int(len(tasks) * 0.99):]
    kinds = Counter()
    late_after_free, sent_before_free, resent_after_free = [], [], []
    sent_once = 0
    for t in slowest:
        freed = t["freed"]
        if freed is None or freed <= t["first_sent_unix_ns"]:
            kinds["idle at submit"] += 1
        elif t["start_unix_ns"] - freed < 100_000:
            kinds["picked up at once"] += 1
        elif t["arrived_unix_ns"] and t["arrived_unix_ns"] - freed > 50_000:
            kinds["arrived late"] += 1
            late_after_free.append((t["arrived_unix_ns"] - freed) / 1e3)
            if t["switch_sent_unix_ns"]:
                sent_before_free.append((freed - t["switch_sent_unix_ns"]) / 1e3)
            if t.get("switch_sends", 0) == 1:
                sent_once += 1
            elif t.get("switch_sends", 0) > 1:
                resent_after_free.append((t["switch_last_sent_unix_ns"] - freed) / 1e3)
        else:
            kinds["other"] += 1
    p99 = (slowest[0]["start_unix_ns"] - slowest[0]["first_sent_unix_ns"]) / 1e6
    print(f"{level} at {utilisation * 100:.0f} %: {len(tasks)} tasks, p99 {p99:.2f} ms; slowest 1 %: {dict(kinds)}")
    if late_after_free:
        print(
            f"  arrived late: {statistics.median(late_after_free):.0f} us after their executor freed (median); "
            f"first sent {statistics.median(sent_before_free):.0f} us before it freed"
        )
    if resent_after_free or sent_once:
        print(f"  arrived late, sent once: {sent_once}; sent again after a RETURN: {len(resent_after_free)}", end="")
        if resent_after_free:
            print(f", last sent {statistics.median(resent_after_free):.0f} us after their executor freed (median)")
        else:
            print()
