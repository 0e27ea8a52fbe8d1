"""What the summary scripts of docs/bench-results share: a quantile of raw values; the
priority experiment's queueing over every task, from its per-level JSON lines; when each
SW1 task's executor freed, from task records."""
from collections import defaultdict


def quantile(values, q):
    """The value at rank int(q * n) of the sorted values (the largest for q = 1), NaN for
    none."""
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def all_tasks(ls, level, q):
    """Quantile q of every task's queueing at `level`: the levels' CDFs weighted by their
    task counts (to the CDFs' resolution), found by bisection."""
    runs = [x for x in ls if x["level"] == level]
    total = sum(x["tasks"] for x in runs)

    def below(t):
        def frac(x):
            fs = [f for ms, f in x["queue_cdf_ms"] if ms <= t]
            return fs[-1] if fs else 0.0

        return sum(x["tasks"] * frac(x) for x in runs) / total

    lo, hi = 0.0, max(x["queue_cdf_ms"][-1][0] for x in runs)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if below(mid) < q else (lo, mid)
    return hi


def mark_executor_freed(tasks):
    """Sets each task record's "freed" to the end (start + run time) of the task its
    executor ran before it in the same round, or None for an executor's first."""
    by_executor = defaultdict(list)
    for t in tasks:
        by_executor[(t.get("round", 1), t["node"], t["executor"])].append(t)
    for ts in by_executor.values():
        ts.sort(key=lambda t: t["start_unix_ns"])
        freed = None
        for t in ts:
            t["freed"] = freed
            freed = t["start_unix_ns"] + t["run_ns"]
