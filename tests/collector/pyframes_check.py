#!/usr/bin/env python3
"""The collector's Python frame reader (collector/src/PyFrames.*) on the interpreter running
this script: the frames it reads, with the GIL released and held, against the interpreter's own
frames (sys._getframe), and its line table decoder against co_lines().

usage: PYTHON pyframes_check.py DIR_OF__pyframes_probe.so
Run by ctest once per interpreter the build found (tests/collector/CMakeLists.txt,
POOLSCOPE_TEST_PYTHONS). Prints one line per check, exits 1 if any fails.
"""
import sys
import threading
import types

sys.path.insert(0, sys.argv[1])
import _pyframes_probe as probe  # noqa: E402

failures = []
MAX = 64  # the probe's depth limit


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def truth(skip=1):
    """The caller's frames as the interpreter sees them, innermost first."""
    out, f = [], sys._getframe(skip)
    while f is not None and len(out) < MAX:
        c = f.f_code
        out.append((c.co_filename, getattr(c, "co_qualname", c.co_name), f.f_lineno))
        f = f.f_back
    return out


def same(got, want, what):
    check(got == want, f"{what}: {len(got)} frames == the interpreter's {len(want)}")
    if got != want:
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else None
            w = want[i] if i < len(want) else None
            print(f"     {i:2} got {g}\n        want {w}")


class Model:
    def forward(self, release):
        return probe.capture(release), truth()

    def nested(self, release):
        def inner():
            return [probe.capture(release) for _ in range(1)][0], truth()
        return inner()


def layer(m, release):
    return m.forward(release)


def gen(release):
    yield probe.capture(release), truth()


def recurse(n, release):
    if n == 0:
        return probe.capture(release), truth()
    return recurse(n - 1, release)


def main():
    status = probe.status()
    v = "%d.%d" % sys.version_info[:2]
    print(f"python {sys.version.split()[0]}: {status}")
    if sys.version_info >= (3, 14):
        # A layout this collector does not know: off, with the reason, and nothing read.
        check("off" in status and v in status, f"Python {v} is refused with its reason")
        check(layer(Model(), True)[0] == [], "no frames read")
        print(f"pyframes {v}: {'FAIL' if failures else 'PASS'} ({len(failures)} failures)")
        return 1 if failures else 0
    check(f"python: {v}" in status and "off" not in status, f"the reader knows Python {v}")

    code = Model.forward.__code__
    before = sys.getrefcount(code)
    for release in (True, False):
        how = "GIL released" if release else "GIL held"
        got, want = layer(Model(), release)
        same(got, want, f"method call, {how}")
        got, want = Model().nested(release)
        # The comprehension has a frame of its own up to 3.11; truth() sees the same frames.
        same(got[1:] if sys.version_info < (3, 12) else got, want, f"closure + comprehension, {how}")
        got, want = next(gen(release))
        same(got, want, f"generator, {how}")
        got, want = recurse(100, release)
        same(got, want, f"recursion past the depth limit, {how}")
        check(len(got) == MAX, f"depth limit keeps the innermost {MAX} ({how})")
        ns = {"probe": probe, "truth": truth, "release": release}
        exec(compile("r = probe.capture(release), truth()\n", "<exec'd>", "exec"), ns)
        same(*ns["r"], f"exec'd code, {how}")
    for _ in range(1000):
        layer(Model(), True)
    check(sys.getrefcount(code) == before, "reference counts untouched")
    check(probe.status().endswith(", checked"), f"the layout was proven by checked reads ({probe.status()})")

    # Another thread, while this one keeps running Python code.
    out = []
    t = threading.Thread(target=lambda: out.append(layer(Model(), True)))
    t.start()
    while t.is_alive():
        sum(range(100))
    t.join()
    same(*out[0], "another thread, GIL released")

    # Line tables of every function of a few standard modules.
    import argparse, collections, email.message, json.decoder  # noqa: E401
    seen = set()
    for m in (argparse, collections, email.message, json.decoder):
        for val in vars(m).values():
            if isinstance(val, types.FunctionType):
                seen.add(val.__code__)
            elif isinstance(val, type) and val.__module__ == m.__name__:
                seen.update(w.__code__ for w in vars(val).values() if isinstance(w, types.FunctionType))
    stack = list(seen)
    while stack:
        for k in stack.pop().co_consts:
            if isinstance(k, types.CodeType) and k not in seen:
                seen.add(k)
                stack.append(k)
    bad, n = [], 0
    for c in seen:
        for start, end, line in c.co_lines():
            for off in range(start, end, 2):
                n += 1
                got = probe.line_of(c, off)
                if got != (line or 0):
                    bad.append((c.co_name, off, got, line))
    check(not bad and n > 10000, f"line tables: {n} instructions of {len(seen)} code objects match co_lines()"
          + (f"; first mismatches {bad[:5]}" if bad else ""))

    print(f"pyframes {v}: {'FAIL' if failures else 'PASS'} ({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
