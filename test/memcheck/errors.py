#!/usr/bin/env python3
"""Read valgrind's logs (one per process) and print the errors that are
durable's: any error with a frame of durable's code in one of its stacks
(the error's, the allocation's or free's, the uninitialised value's
origin), durable's frames known by the function names durable.so defines.
PostgreSQL's packages are not built with USE_VALGRIND, so the server itself
reports a few known false positives: padding bytes written by a syscall
(WAL, SLRU pages, the relcache init file).  Those are the one kind of error
that is not durable's when its frames are reached only through
CommitTransactionCommand, InitPostgres and the like; they are counted apart.
durable's utility hook hands every command on (to standard_ProcessUtility or
to another library's hook): its frame above that call is a caller's, not
durable's work, and does not make an error durable's.  Exit status 1 when durable has one.

    errors.py LOGDIR DURABLE_SO
"""
import collections
import glob
import os
import re
import subprocess
import sys

# Frames of PostgreSQL's own machinery: an error whose first durable frame
# lies below one of these happened in PostgreSQL's work, not durable's.
CORE_BOUNDARY = re.compile(
    r"\b(CommitTransactionCommand|AbortCurrentTransaction|StartTransactionCommand|InitPostgres"
    r"|BackgroundWorkerInitializeConnection\w*|PreCommit_Notify|AtCommit_Notify|XLogFlush"
    r"|ProcessCompletedNotifies|SimpleLru\w+|standard_ProcessUtility)\b")

# durable's frame that only hands the command on (the utility hook, to the
# server's or to another library's hook).
PASS_THROUGH = re.compile(r"\b\w*_ProcessUtility\b")


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


def function_names(library):
    """Every function durable.so defines (static ones too: it is not stripped)."""
    out = subprocess.run(["nm", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[1:2] and line.split()[1] in "tT"}


FRAME = re.compile(r"(?:at|by) 0x[0-9A-F]+: (\S+) \((.*)\)$")


def in_durable(line, names):
    m = FRAME.search(line)
    return bool(m) and (m.group(1) in names or "/durable.so" in m.group(2))


def durable_frame(lines, i, names):
    """Whether line i is a frame of durable's own work: not the utility
    hook's call of the next *_ProcessUtility (the frame below it)."""
    return in_durable(lines[i], names) and not (i > 0 and PASS_THROUGH.search(lines[i - 1]))


def durable_first(frames, names):
    """Whether the stack reaches durable's code before PostgreSQL's machinery."""
    for line in frames:
        if CORE_BOUNDARY.search(line):
            return False
        if in_durable(line, names):
            return True
    return False


def is_durable(block, names):
    """A syscall's padding is durable's only when the stack reaches durable
    first; any other error is durable's when any of its stacks shows one of
    durable's frames."""
    if block[0].startswith("Syscall param"):
        origin = next((i for i, line in enumerate(block) if "was created by" in line), len(block))
        return durable_first(block[:origin], names) or durable_first(block[origin:], names)
    return any(durable_frame(block, i, names) for i in range(len(block)))


def main():
    logdir = sys.argv[1]
    names = function_names(sys.argv[2])
    ours = collections.Counter()
    example = {}
    core = 0
    for path in sorted(glob.glob(os.path.join(logdir, "*.log"))):
        for block in blocks(path):
            if not re.match(r"(Invalid|Conditional|Use of|Syscall|Source and|Mismatched|Argument|Jump)",
                            block[0]):
                continue
            if is_durable(block, names):
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
