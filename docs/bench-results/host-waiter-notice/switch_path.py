"""Where two-level's SW1 tasks spend their time from the SUBMIT's arrival at the switch
to their start, p50 / p90 in µs, at one load, from task records: the switch's flush
(`switch_flush_called` to `switch_sent`: the send of every frame before the task's own
runs that frame's whole path on the testbed), the task's arrival at its executor's
stack after the SUBMIT reached the switch, and the time on the host from there.

    python3 docs/bench-results/host-waiter-notice/switch_path.py LOAD RECORDS.jsonl ...

LOAD is the utilisation (0.7 for 70 %); each file is a run's `sw1_tasks.jsonl`, pooled.
`switch-timeline/split.py` splits one run's delay into every part up to the executor's
stack; this pools runs and adds the time on the host.
"""
import json
import pathlib
import sys
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from queueing import quantile as pct  # noqa: E402


load = float(sys.argv[1])
spans = defaultdict(lambda: defaultdict(list))
for path in sys.argv[2:]:
    for line in open(path):
        t = json.loads(line)
        if abs(t["utilization"] - load) > 1e-9:
            continue
        s = spans[t["level"]]
        s["flush to sent"].append(t["switch_sent_unix_ns"] - t["switch_flush_called_unix_ns"])
        s["switch to stack"].append(t["arrived_unix_ns"] - t["switch_arrived_unix_ns"])
        s["on the host"].append(t["start_unix_ns"] - t["arrived_unix_ns"])
        s["delay"].append(t["start_unix_ns"] - t["first_sent_unix_ns"])
for level, s in sorted(spans.items()):
    cells = [f"{name} {pct(v, .5) / 1e3:.0f} / {pct(v, .9) / 1e3:.0f}" for name, v in s.items()]
    print(f"{level} at {load:.0%}: " + " | ".join(cells))
