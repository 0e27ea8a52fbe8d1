"""The sleeps' overshoot against how many sleeps end around the same time, from
`bolt bench all --only sw1 --task-records` (its sw1_tasks.jsonl, whose lines carry each
task's `run_ns`). A sleep's crowd is the number of other 10-ms sleeps due within 0.5 ms
of its own end, on the whole machine (every executor shares its two cores).

    python3 docs/bench-results/sim-validate-quiet/crowd.py DIR/sw1_tasks.jsonl
"""
import json,collections,bisect,sys
by=collections.defaultdict(list)
for l in open(sys.argv[1]):
    t=json.loads(l)
    if t['run_ns']==0: continue
    by[(t['level'],t['utilization'])].append(t)
for k in sorted(by):
    ts=by[k]
    due=sorted(t['start_unix_ns']+10_000_000 for t in ts)
    rows=collections.defaultdict(list)
    for t in ts:
        d=t['start_unix_ns']+10_000_000; over=t['run_ns']-10_000_000
        # crowd: sleeps due within 0.5 ms before or after this one's due, on the whole machine
        n=bisect.bisect_left(due,d+500_000)-bisect.bisect_left(due,d-500_000)-1
        b=0 if n<4 else 1 if n<8 else 2 if n<16 else 3
        rows[b].append(over)
    out=[]
    for b in range(4):
        v=sorted(rows[b])
        if not v: out.append('-'); continue
        out.append(f"{['0-3','4-7','8-15','16+'][b]}: n={len(v)} p50={v[len(v)//2]//1000} p90={v[int(len(v)*.9)]//1000} p99={v[int(len(v)*.99)]//1000} mean={sum(v)//len(v)//1000}")
    print(k, ' | '.join(out))
