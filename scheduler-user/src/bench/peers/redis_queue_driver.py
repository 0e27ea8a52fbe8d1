"""A plain Redis pull queue: the submitter LPUSHes "id micros", --workers worker
processes BRPOP it, run the task and LPUSH "id start_ns" to a results list."""

import os
import subprocess
import sys
import time

from peers_common import measure, parse_args, task_body, unavailable, wait_or_kill

TASKS, RESULTS, READY = "bolt:peers:tasks", "bolt:peers:results", "bolt:peers:ready"


def worker(port):
    import redis

    r = redis.Redis(host="127.0.0.1", port=port)
    r.lpush(READY, os.getpid())
    while True:
        item = r.brpop(TASKS, timeout=1)
        if item is None:
            continue
        body = item[1].decode()
        if body == "stop":
            return
        tid, micros = body.split()
        r.lpush(RESULTS, f"{tid} {task_body(int(micros))}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]))
        return
    args = parse_args()
    try:
        import redis
    except ImportError as e:
        unavailable(f"redis (Python client) does not import: {e}")
    r = redis.Redis(host="127.0.0.1", port=args.redis_port)
    r.delete(TASKS, RESULTS, READY)
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(args.redis_port)])
             for _ in range(args.workers)]
    next_id = [0]

    def submit(micros):
        next_id[0] += 1
        r.lpush(TASKS, f"{next_id[0]} {micros}")
        return next_id[0]

    def results(ids, deadline):
        wanted = {tid: i for i, tid in enumerate(ids)}
        out = [0] * len(ids)
        got = 0
        while got < len(ids):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{len(ids) - got} results missing")
            item = r.brpop(RESULTS, timeout=max(1, int(left)))
            if item is None:
                continue
            tid, start = item[1].decode().split()
            if int(tid) in wanted:
                out[wanted[int(tid)]] = (int(start), time.time_ns())
                got += 1
        return out

    try:
        for _ in range(args.workers):
            if r.brpop(READY, timeout=30) is None:
                raise TimeoutError("workers did not start")
        measure(args, submit, results)
    finally:
        for _ in procs:
            r.lpush(TASKS, "stop")
        for p in procs:
            wait_or_kill(p, 5)


if __name__ == "__main__":
    main()
