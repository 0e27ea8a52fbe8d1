"""One line per run of `bolt bench all --only trace --only priority` (or `--only priority`)
in a directory, this one by default: XDP shares, per-level queueing medians (one-level /
two-level), the trace's delays. Each run is NAME-priority.jsonl and NAME-trace.jsonl.

    python3 docs/bench-results/held-back/summarize.py [DIR]
"""
import glob
import json
import os
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def load(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


for prio_path in sorted(glob.glob(os.path.join(here, '*-priority.jsonl'))):
    run = os.path.basename(prio_path)[: -len('-priority.jsonl')]
    q = {(r['level'], r['mode'], r['priority']): r for r in load(prio_path)}
    med = lambda level, p: q[(level, 'priorities', p)]['queue_ms']['p50']
    line = '%-28s priority XDP %.1f %%, FIFO XDP %.1f %%' % (
        run, 100 * q[('two-level', 'priorities', 1)]['xdp_share'], 100 * q[('two-level', 'fifo', None)]['xdp_share'])
    for p in (1, 2, 3, 4):
        one, two = med('one-level', p), med('two-level', p)
        line += ' | L%d %.2f / %.2f ms (%.2fx)' % (p, one, two, two / one)
    t = {(r['level'], r['work']): r for r in load(os.path.join(here, run + '-trace.jsonl')) if r['kind'] == 'summary'}
    if t:
        one, two = t[('one-level', 'sleep')], t[('two-level', 'sleep')]
        line += ' | trace (sleep) XDP %.1f %%, p50 %.3f / %.3f ms, p99 %.1f / %.1f ms | trace (spin) XDP %.1f %%' % (
            100 * two['xdp_share'], one['sched_delay_ms']['p50'], two['sched_delay_ms']['p50'],
            one['sched_delay_ms']['p99'], two['sched_delay_ms']['p99'], 100 * t[('two-level', 'spin')]['xdp_share'])
    print(line)
