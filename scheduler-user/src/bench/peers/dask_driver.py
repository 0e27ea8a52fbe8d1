"""Dask distributed: a LocalCluster of --workers single-threaded worker processes on
loopback, tasks submitted one by one with Client.submit."""

import time

from peers_common import measure, parse_args, task_body, unavailable


def main():
    args = parse_args()
    try:
        from dask.distributed import Client, LocalCluster, wait
    except ImportError as e:
        unavailable(f"dask.distributed does not import: {e}")

    cluster = LocalCluster(
        n_workers=args.workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        local_directory=args.tmp,
    )
    client = Client(cluster)

    def submit(micros):
        return client.submit(task_body, micros, pure=False)

    def starts(futures, deadline):
        wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        return client.gather(futures)

    try:
        measure(args, submit, starts)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
