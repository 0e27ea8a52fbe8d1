"""Dask distributed on the DAG workloads of `bolt bench matrix`: a LocalCluster of
`workers` single-threaded worker processes on loopback. Each job's input files are
scattered to the workers round-robin (data on the workers, as Bolt's stores hold it)
and its tasks submitted with their inputs' futures, so Dask places each task by where
its data is and steals work. Each task hashes its inputs (blake2b) as many passes as
make `task_ms` of CPU over a root task's inputs here (more inputs, more CPU, as Bolt's
handlers), and returns an output of `out_len` bytes.

Usage: python dask_dag_driver.py JOBS.json RESULTS.json"""

import hashlib
import json
import sys
import time


def run_task(passes, out_len, *inputs):
    start = time.time()
    data = [x[0] if isinstance(x, tuple) else x for x in inputs]
    h = hashlib.blake2b()
    for _ in range(passes):
        for x in data:
            h.update(x)
    d = h.digest()
    out = (d * (out_len // len(d) + 1))[:out_len]
    return out, start, time.time()


def ns_per_byte():
    block = bytes(range(256)) * 4096
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter_ns()
        h = hashlib.blake2b()
        for _ in range(8):
            h.update(block)
        best = min(best, (time.perf_counter_ns() - t) / (8 * len(block)))
    return best


def main():
    spec = json.load(open(sys.argv[1]))
    from dask.distributed import Client, LocalCluster, wait

    cluster = LocalCluster(
        n_workers=spec["workers"],
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        local_directory=spec["tmp"],
    )
    client = Client(cluster)
    results = []
    try:
        client.wait_for_workers(spec["workers"], timeout=60)
        addrs = sorted(client.scheduler_info()["workers"])
        per_byte = ns_per_byte()
        for job in spec["jobs"]:
            files = [
                client.scatter(bytes([k % 251]) * size, workers=[addrs[k % len(addrs)]], direct=True, hash=False)
                for k, size in enumerate(job["files"])
            ]
            tasks = job["tasks"]
            # As Bolt's handlers: the same passes for every task of the job, calibrated on
            # a root's inputs, so a task's CPU grows with the bytes it reads.
            passes = max(1, round(spec["task_ms"] * 1e6 / (max(1, job["calibration_bytes"]) * per_byte)))
            futures = [None] * len(tasks)
            started = time.time()
            # Parents before children: a task is submitted once its parents' futures exist.
            pending = list(range(len(tasks)))
            for _ in range(len(tasks)):
                if not pending:
                    break
                later = []
                for k in pending:
                    t = tasks[k]
                    if any(kind == "task" and futures[i] is None for kind, i in t["inputs"]):
                        later.append(k)
                        continue
                    inputs = [files[i] if kind == "file" else futures[i] for kind, i in t["inputs"]]
                    futures[k] = client.submit(run_task, passes, t["out_len"], *inputs, pure=False)
                pending = later
            if pending:
                raise RuntimeError(f"{job['variant']}: tasks {pending[:5]} wait on a cycle")
            wait(futures, timeout=spec["timeout_s"])
            makespan = time.time() - started
            runs = client.gather(futures)
            busy = sum(end - start for _, start, end in runs)
            results.append(
                {"experiment": job["experiment"], "variant": job["variant"], "tasks": len(runs),
                 "makespan_s": makespan, "busy_s": busy}
            )
            del futures, files, runs
    finally:
        client.close()
        cluster.close()
    json.dump(results, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
