"""Per-level queueing medians of the priority runs in this directory: whether levels 1 to 4
are ordered at each level of the scheduler, and two-level over one-level per level.

    python3 docs/bench-results/priority-60s/summarize.py [DIR]
"""
import json
import pathlib
import sys

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
for f in sorted(here.glob("*.jsonl")):
    lines = [json.loads(x) for x in open(f)]
    med = {(l["level"], l["priority"]): l["queue_ms"]["p50"] for l in lines if l["mode"] == "priorities"}
    p99 = {(l["level"], l["priority"]): l["queue_ms"]["p99"] for l in lines if l["mode"] == "priorities"}
    out = [f.stem]
    for level in ("one-level", "two-level"):
        m = [med[(level, p)] for p in (1, 2, 3, 4)]
        ordered = all(a <= b for a, b in zip(m, m[1:]))
        out.append(f"{level} " + " / ".join(f"{x:.2f}" for x in m) + (" ordered" if ordered else " NOT ordered"))
    ratio = [med[("two-level", p)] / med[("one-level", p)] for p in (1, 2, 3, 4)]
    ratio99 = [p99[("two-level", p)] / p99[("one-level", p)] for p in (1, 2, 3, 4)]
    out.append("p50 two/one " + " / ".join(f"{x:.2f}" for x in ratio))
    out.append("p99 two/one " + " / ".join(f"{x:.2f}" for x in ratio99))
    print(" | ".join(out))
