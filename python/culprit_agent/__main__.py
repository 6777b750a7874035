"""python3 -m culprit_agent check HOST:PORT [--job JOB] [--timeout S]

Says which agent library was loaded, who this process is in its job and where each part of
that came from (culprit_agent.identity), what its Hello would say, and whether culpritd at
HOST:PORT answers it: connects as this rank's agent (sending no records) and waits up to
--timeout seconds (default 5) to be accepted. Exit 0 when accepted, 1 when not, 2 on bad
arguments. The job then appears in culpritd like any other until it retires.
"""
import argparse
import logging
import sys
import time

from . import _lib, identity
from .agent import Agent


def check(args):
    lib = _lib.load()
    print(f"library: {lib._name}")
    a = Agent(args.server, args.job)
    for f in identity.FIELDS:
        if f in a.identity:
            print(f"{f}: {a.identity[f]} ({a.sources[f]})")
    if not a.enabled:
        print("not started: the agent could not start (the error above says why)")
        return 1
    print(f"hello: job {a.job!r}, agent {a.host}/rank-{a.rank}, host {a.host!r}, rank {a.rank} of {a.world}")
    deadline = time.monotonic() + args.timeout
    st = a.stats()
    while time.monotonic() < deadline and not st["connected"] and not st["refused"]:
        time.sleep(0.05)
        st = a.stats()
    a.close(timeout_s=1)
    if st["connected"]:
        print(f"culpritd at {args.server}: accepted")
        return 0
    why = st["refusal"].decode(errors="replace") if st["refused"] else f"no answer within {args.timeout:g} s"
    print(f"culpritd at {args.server}: not accepted: {why}")
    return 1


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m culprit_agent", description=__doc__.split("\n\n")[1])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="what this process would send, and whether culpritd answers")
    c.add_argument("server", metavar="HOST:PORT")
    c.add_argument("--job", help="the job name (default: the launcher's)")
    c.add_argument("--timeout", type=float, default=5.0)
    args = p.parse_args(argv)
    logging.basicConfig(format="%(message)s")
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
