#!/usr/bin/env python3
"""Read valgrind's logs (one per process) and print the errors that are
durable's: an error whose stack reaches durable's code before PostgreSQL's
own transaction or startup machinery, or whose uninitialised value was
created in durable's code.  PostgreSQL's packages are not built with
USE_VALGRIND, so the server itself reports a few known false positives
(padding bytes written to WAL, SLRU pages and the relcache init file): those
reach durable's frames only through CommitTransactionCommand, InitPostgres
and the like, and are counted apart.  Exit status 1 when durable has one.

    errors.py LOGDIR
"""
import collections
import glob
import os
import re
import sys

# Frames of PostgreSQL's own machinery: an error whose first durable frame
# lies below one of these happened in PostgreSQL's work, not durable's.
CORE_BOUNDARY = re.compile(
    r"\b(CommitTransactionCommand|AbortCurrentTransaction|StartTransactionCommand|InitPostgres"
    r"|BackgroundWorkerInitializeConnection\w*|PreCommit_Notify|AtCommit_Notify|XLogFlush"
    r"|ProcessCompletedNotifies|SimpleLru\w+)\b")


def blocks(path):
    """The error reports of one log, each as its list of lines."""
    current = []
    for line in open(path, errors="replace"):
        m = re.match(r"==\d+== ?(.*)", line)
        if not m:
            continue
        body = m.group(1).rstrip()
        if body:
            current.append(body)
        elif current:
            yield current
            current = []
    if current:
        yield current


def durable_first(frames):
    """Whether the stack reaches durable's code before PostgreSQL's machinery."""
    for line in frames:
        if CORE_BOUNDARY.search(line):
            return False
        if "durable" in line and ("(in " in line or ".c:" in line):
            return True
    return False


def is_durable(block):
    """The error's own stack, or the stack that created the uninitialised
    value, reaches durable's code first."""
    origin = next((i for i, line in enumerate(block) if "was created by" in line), len(block))
    return durable_first(block[:origin]) or durable_first(block[origin:])


def main():
    logdir = sys.argv[1]
    ours = collections.Counter()
    example = {}
    core = 0
    for path in sorted(glob.glob(os.path.join(logdir, "*.log"))):
        for block in blocks(path):
            if not re.match(r"(Invalid|Conditional|Use of|Syscall|Source and|Mismatched|Argument|"
                            r"Jump|\d+ bytes in)", block[0]):
                continue
            if is_durable(block):
                key = block[0] + " | " + " <- ".join(block[1:4])
                ours[key] += 1
                example.setdefault(key, (path, block))
            else:
                core += 1
    for key, n in ours.most_common():
        path, block = example[key]
        print(f"{n} x {block[0]}  ({os.path.basename(path)})")
        print("    " + "\n    ".join(block[1:30]))
    print(f"{sum(ours.values())} errors in durable's code ({len(ours)} distinct), "
          f"{core} in PostgreSQL's own (not built for valgrind)")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
