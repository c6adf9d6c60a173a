#!/usr/bin/env python3
"""A noisy neighbour for timing tests: one process busy in bursts.

Busy-loops for a random time in --busy (ms, low:high), sleeps for a random
time in --idle, and repeats for --seconds. Run it beside a timing-bound test
to see whether the test holds on a shared CI machine, e.g.

  python3 bench/noise/busy.py --busy 20:200 --idle 20:200 &   # ~50% busy
  python3 bench/noise/busy.py --busy 20:100 --idle 200:600 &  # ~15% busy

bench/results/cpu/timing-tests-under-noise.txt has what the tests did.
"""
import argparse
import random
import time


def span(text):
    low, high = (float(x) / 1000 for x in text.split(":"))
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"{text}: expected LOW:HIGH in ms")
    return low, high


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--busy", type=span, default=span("20:200"),
                   help="burst length range in ms (default 20:200)")
    p.add_argument("--idle", type=span, default=span("20:200"),
                   help="pause length range in ms (default 20:200)")
    p.add_argument("--seconds", type=float, default=900,
                   help="how long to run (default 900)")
    a = p.parse_args()
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        until = time.monotonic() + random.uniform(*a.busy)
        while time.monotonic() < until:
            pass
        time.sleep(random.uniform(*a.idle))


if __name__ == "__main__":
    main()
