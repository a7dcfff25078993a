"""Summarise a sampler file (see sitecustomize.py here): the share of samples where the
loop waited in select (idle), and the frames that the busy samples were in, self and
inclusive.  .venv/bin/python bench/sampler/top.py FILE [--n 30] [--match TEXT]"""

import argparse
import collections

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--n", type=int, default=30)
ap.add_argument("--thread", default="main", help="which thread: main, or a name prefix as [AnyIO worker] (default main)")
ap.add_argument("--match", default="", help="only busy stacks through a frame containing this text")
args = ap.parse_args()
total = idle = 0
self_c: collections.Counter = collections.Counter()
incl: collections.Counter = collections.Counter()
for line in open(args.file):
    n, _, stack = line.rstrip("\n").partition(" ")
    n = int(n)
    frames = stack.split(";")
    if not frames[0].startswith("[" + args.thread):
        continue
    frames = frames[1:]
    total += n
    if frames[-1] in ("selectors.py:select", "threading.py:wait", "queue.py:get", "threading.py:_wait_for_tstate_lock"):
        idle += n
        continue
    if args.match and not any(args.match in f for f in frames):
        continue
    self_c[frames[-1]] += n
    for f in set(frames):
        incl[f] += n
busy = total - idle
print(f"samples {total}, idle (select) {idle / max(total, 1):.1%}, busy {busy}")
print("-- self"); [print(f"{v / max(busy, 1):6.1%} {k}") for k, v in self_c.most_common(args.n)]
print("-- inclusive"); [print(f"{v / max(busy, 1):6.1%} {k}") for k, v in incl.most_common(args.n)]
