"""Parallel word count over files: one task per file counts its words, the client adds
the counts up (fan-in) and prints the most frequent ones.

    target/python-venv/bin/python examples/wordcount.py docs/*.md

Without --switch it starts a software switch, an object store and executors in this
process (loopback); with --switch/--store it uses running ones (`bolt switch`,
`bolt store`) and executors started elsewhere with this file's functions.
"""

import argparse
import collections
import re
import sys

import bolt

WORD = re.compile(r"[a-z][a-z'-]*")


@bolt.task
def count_words(text):
    """Word -> count for one file's text."""
    return dict(collections.Counter(WORD.findall(text.lower())))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--switch", help="IP:port of a running switch (default: start one here)")
    p.add_argument("--store", help="IP:port of this host's object store (with --switch)")
    p.add_argument("--executors", type=int, default=4)
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args(argv)

    local = None
    if args.switch is None:
        local = bolt.Local(executors=args.executors)
        args.switch, args.store = local.switch.address, local.store.address

    texts = []
    for name in args.files:
        with open(name, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    client = bolt.Client(args.switch, store=args.store, timeout=60)
    total = collections.Counter()
    for counts in client.map(count_words, texts):
        total.update(counts)

    print(f"{sum(total.values())} words, {len(total)} distinct, in {len(texts)} files")
    for word, n in total.most_common(args.top):
        print(f"{n:8} {word}")
    if local:
        local.shutdown()
    return total


if __name__ == "__main__":
    main(sys.argv[1:])
