# The table of tests/gpu/gpt2_levels.sh: per level, the median over all blocks (pooled across the
# processes' lines) of the level's cycle time over its block's "off" cycle, with the 95 % interval
# of that median from order statistics, and the same between consecutive levels.
import json
import math
import statistics
import sys

NAMES = {0: "off", 1: "empty", 2: "minimal", 3: "nowm", 4: "full", 5: "full+stacks", 6: "full+python"}


def interval(ratios):
    # The ranks whose values bracket the median with >= 95 % confidence (binomial, normal approx.).
    n = len(ratios)
    s = sorted(ratios)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return s[lo], s[hi]


def row(label, ratios):
    if not ratios:
        return f"{label:<22} no blocks"
    med = statistics.median(ratios)
    lo, hi = interval(ratios)
    return (f"{label:<22} {len(ratios):>6} {100 * (med - 1):>+9.2f} %   "
            f"{100 * (lo - 1):+.2f} .. {100 * (hi - 1):+.2f} %")


blocks, levels = [], None
for line in open(sys.argv[1]):
    r = json.loads(line)
    levels = r["levels"]
    blocks += [{int(k): v for k, v in b.items()} for b in r["blocks"]]
print(f"{len(blocks)} blocks; cycle ms with the callbacks off: median "
      f"{statistics.median(b[0] for b in blocks):.2f}")
print(f"{'level / baseline':<22} {'blocks':>6} {'median':>11}   95 % interval")
for lev in levels[1:]:
    print(row(f"{NAMES.get(lev, lev)} / off", [b[lev] / b[0] for b in blocks if lev in b and 0 in b]))
for a, b_ in zip(levels[1:], levels[2:]):
    print(row(f"{NAMES.get(b_, b_)} / {NAMES.get(a, a)}",
              [b[b_] / b[a] for b in blocks if a in b and b_ in b]))
# The call-site levels also against the collector without them.
for lev in levels[1:]:
    if lev > 4 and 4 in levels and levels.index(lev) != levels.index(4) + 1:
        print(row(f"{NAMES.get(lev, lev)} / full", [b[lev] / b[4] for b in blocks if lev in b and 4 in b]))
