"""Monte Carlo estimate of pi, fanned out: each task throws `samples` random points at
the unit square with its own seed and counts those inside the quarter circle; the
client adds the counts (fan-in).

    target/python-venv/bin/python examples/montecarlo.py --tasks 64 --samples 20000

Without --switch it starts a software switch, an object store and executors in this
process (loopback).
"""

import argparse
import random
import sys

import bolt


@bolt.task
def inside_quarter_circle(seed, samples):
    rng = random.Random(seed)
    return sum(1 for _ in range(samples) if rng.random() ** 2 + rng.random() ** 2 <= 1.0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--samples", type=int, default=20000)
    p.add_argument("--switch", help="IP:port of a running switch (default: start one here)")
    p.add_argument("--store", help="IP:port of this host's object store (with --switch)")
    p.add_argument("--executors", type=int, default=4)
    args = p.parse_args(argv)

    local = None
    if args.switch is None:
        local = bolt.Local(executors=args.executors)
        args.switch, args.store = local.switch.address, local.store.address

    client = bolt.Client(args.switch, store=args.store, timeout=120)
    seeds = range(args.tasks)
    hits = sum(client.map(inside_quarter_circle, seeds, [args.samples] * args.tasks))
    estimate = 4.0 * hits / (args.tasks * args.samples)
    print(f"pi ~ {estimate:.5f} from {args.tasks} tasks x {args.samples} samples")
    if local:
        local.shutdown()
    return estimate


if __name__ == "__main__":
    main(sys.argv[1:])
