#!/usr/bin/env python3
"""`poolscope report` of one trace by several builds of the CLI, alternated round by round.

    tests/bench/report_rounds.py [--discard] TRACE ROUNDS NAME=CLI[,ARG...] [NAME=CLI[,ARG...] ...]

ARGs after a comma replace the verb `report` (e.g. `many=poolscope,dump,--threads,0`), the trace
following them. With --discard the output goes to /dev/null and is not compared (a `dump` of
100 M events prints ~30 GB).

Each round runs every build once, in an order that rotates from round to round; wall time, and
the child's own user+sys CPU and max RSS from wait4 (no /usr/bin/time needed, so it runs on
the GPU machines too). Prints a table of medians with the range, each build's ratio to the first
one's, the load before each round, and fails when two builds' reports differ.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(cmd, trace, discard):
    """Exit status, stdout, stderr, wall s, user+sys s and max RSS KiB of one run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            open(os.devnull, "wb") as null:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd + [trace], stdout=null if discard else out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read(), err.read(), wall, usage.ru_utime + usage.ru_stime,
                usage.ru_maxrss)


def main():
    args = sys.argv[1:]
    discard = bool(args) and args[0] == "--discard"
    if discard:
        args = args[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    trace, rounds = args[0], int(args[1])
    builds = []
    for arg in args[2:]:
        name, _, spec = arg.partition("=")
        if not spec:
            sys.exit(f"not NAME=CLI: {arg}")
        cli, *verb = spec.split(",")
        builds.append((name, [cli] + (verb or ["report"])))
    figures = {name: [] for name, _ in builds}
    outputs = {}
    loads = []
    for r in range(rounds):
        loads.append(os.getloadavg()[0])
        order = builds[r % len(builds):] + builds[:r % len(builds)]
        for name, cli in order:
            rc, out, err, wall, cpu, rss = run_once(cli, trace, discard)
            if rc != 0:
                sys.exit(f"{name} failed ({rc}): {err.decode(errors='replace')}")
            figures[name].append((wall, cpu, rss))
            outputs.setdefault(name, out)
            print(f"round {r + 1} {name}: wall {wall:.2f} s, cpu {cpu:.2f} s", flush=True)
    first = builds[0][0]
    for name, _ in builds[1:]:
        if not discard and outputs[name] != outputs[first]:
            sys.exit(f"the outputs of {first} and {name} differ")

    def med(name, k):
        return statistics.median(f[k] for f in figures[name])

    def rng(name, k):
        vals = [f[k] for f in figures[name]]
        return f"{min(vals):.2f}-{max(vals):.2f}"

    print()
    print(f"{trace}: {rounds} rounds, cores {os.cpu_count()}, 1-min load before each round: "
          + ", ".join(f"{x:.1f}" for x in loads))
    print()
    print("| build | wall s, median (range) | CPU s, median (range) | max RSS MiB (most) | wall / first |")
    print("|---|---:|---:|---:|---:|")
    for name, _ in builds:
        rss_text = f"{max(f[2] for f in figures[name]) / 1024:.0f}"
        print(f"| {name} | {med(name, 0):.2f} ({rng(name, 0)}) | {med(name, 1):.2f} ({rng(name, 1)})"
              f" | {rss_text} | {med(name, 0) / med(first, 0):.2f} |")
    print()
    print("outputs discarded, not compared" if discard else "identical outputs: yes")


if __name__ == "__main__":
    main()
