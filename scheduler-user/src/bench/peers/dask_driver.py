"""Dask distributed: a LocalCluster of --workers single-threaded worker processes on
loopback, tasks submitted one by one with Client.submit."""

import time

from peers_common import measure, parse_args, task_body, unavailable


def main():
    args = parse_args()
    try:
        from dask.distributed import Client, LocalCluster, as_completed
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

    def results(futures, deadline):
        """Each result as it completes (as_completed), with the time it arrived."""
        arrived = {}
        for future in as_completed(futures, timeout=max(0.001, deadline - time.monotonic())):
            arrived[future.key] = (future.result(), time.time_ns())
        return [arrived[f.key] for f in futures]

    try:
        measure(args, submit, results)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
