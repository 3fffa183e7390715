# A real client (issue #11, point 5): a transformers GPT-2 (6 layers, 512 wide, random
# initialisation: nothing is downloaded) trained with AdamW on varying sequence lengths, under
# PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync. Ground truth: torch.cuda.max_memory_reserved()
# and max_memory_allocated(), which read the pool's own high watermarks; the trace's peaks must
# equal them exactly. usage: gpt2_train.py [STEPS] [--nvtx]   (prints {"type":"skip"} without
# transformers). --nvtx (issue #13): each step's forward, backward and optimizer step run inside
# torch.cuda.nvtx ranges "step/forward", "step/backward", "step/optimizer"; the ground truth
# then also lists the ranges pushed ({"type":"nvtx","ranges":N,"names":[...]}).
# --ab (the overhead in one process, tests/gpu/gpt2_ab.sh): recorded under the diagnostic collector,
# whole cycles alternate between the collector's callbacks on and off (poolscope_diag_record), in
# pairs whose order flips every pair; prints {"type":"ab",...} with each side's cycle times and the
# median of the pairs' ratios. The trace of such a run is incomplete by design.
# --levels=1,2,3,4 (tests/gpu/gpt2_levels.sh; the diagnostic collector with POOLSCOPE_BENCH_LEVELS=1):
# blocks of whole cycles, one with the callbacks off and one at each level (poolscope_diag_level),
# in an order that rotates and reverses block by block; prints {"type":"levels",...} with every
# block's cycle times by level.
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
try:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as ex:
    print(json.dumps({"type": "skip", "why": str(ex)}))
    sys.exit(0)

assert "cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "set backend:cudaMallocAsync"
args = [a for a in sys.argv[1:] if not a.startswith("--")]
nvtx = "--nvtx" in sys.argv[1:]
ab = "--ab" in sys.argv[1:]
levels = next(([int(x) for x in a.split("=", 1)[1].split(",")] for a in sys.argv[1:]
               if a.startswith("--levels=")), None)
steps = int(args[0]) if args else 40


class Range:
    # torch.cuda.nvtx.range_push/pop when --nvtx, nothing otherwise; counts what it pushed.
    pushed = []

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        if nvtx:
            torch.cuda.nvtx.range_push(self.name)
            Range.pushed.append(self.name)

    def __exit__(self, *exc):
        if nvtx:
            torch.cuda.nvtx.range_pop()



torch.manual_seed(0)
dev = torch.device("cuda", 0)
cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8192, n_positions=512)
model = GPT2LMHeadModel(cfg).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def pool_settings_from_env():
    # The what-if validation (tests/gpu/whatif_validate.sh) records this loop under given pool
    # settings, read as the C++ workloads read them (tests/workloads/Truth.h). PyTorch sets the
    # default pool's attributes itself when its allocator starts (the model's upload above), so
    # they are set after it, through the driver (libcuda: no other library needed), where the
    # collector sees and records them like any program's.
    thr = os.environ.get("POOLSCOPE_WL_RELEASE_THRESHOLD")
    opp = os.environ.get("POOLSCOPE_WL_REUSE_OPPORTUNISTIC")
    if thr is None and opp is None:
        return
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    pool = ctypes.c_void_p()
    if cuda.cuDeviceGetDefaultMemPool(ctypes.byref(pool), 0) != 0:
        raise SystemExit("cuDeviceGetDefaultMemPool failed")
    RELEASE_THRESHOLD, REUSE_ALLOW_OPPORTUNISTIC = 4, 2  # CUmemPool_attribute
    if thr is not None:
        v = ctypes.c_uint64((1 << 64) - 1 if thr == "max" else int(thr))
        if cuda.cuMemPoolSetAttribute(pool, RELEASE_THRESHOLD, ctypes.byref(v)) != 0:
            raise SystemExit("cuMemPoolSetAttribute(release threshold) failed")
    if opp is not None:
        v = ctypes.c_int(1 if opp == "1" else 0)
        if cuda.cuMemPoolSetAttribute(pool, REUSE_ALLOW_OPPORTUNISTIC, ctypes.byref(v)) != 0:
            raise SystemExit("cuMemPoolSetAttribute(opportunistic reuse) failed")


pool_settings_from_env()
lengths = [64, 256, 128, 512, 96, 384, 192, 448]
record = None
set_level = None
if ab or levels:
    import ctypes
    try:
        # The driver loaded the injection module at its first use (above); opening the same path
        # again gives the loaded module.
        module = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
        record = module.poolscope_diag_record if ab else None
        set_level = module.poolscope_diag_level if levels else None
    except (KeyError, OSError, AttributeError) as ex:
        print(json.dumps({"type": "skip", "why": f"--ab/--levels need the diagnostic collector: {ex}"}))
        sys.exit(0)
times = []
states = []  # per cycle, --ab: True when recorded; --levels: the level
block_order = [0] + (levels or [])
for i in range(steps):
    if set_level is not None and i % len(lengths) == 0:
        c = i // len(lengths)  # cycle 0 warms up at the last level
        if c == 0:
            level = block_order[-1]
        else:
            b, k = divmod(c - 1, len(block_order))
            order = block_order[b % len(block_order):] + block_order[:b % len(block_order)]
            level = (order[::-1] if b % 2 else order)[k]
        torch.cuda.synchronize()
        if set_level(level) != 0:
            print(json.dumps({"type": "skip", "why": "poolscope_diag_level failed"}))
            sys.exit(0)
        states.append(level)
    if record is not None and i % len(lengths) == 0:
        c = i // len(lengths)  # cycle 0 warms up, recorded
        pair, second = divmod(c - 1, 2)
        on = c == 0 or ((second == 0) == (pair % 2 == 0))
        if record(1 if on else 0) != 0:
            print(json.dumps({"type": "skip", "why": "poolscope_diag_record failed"}))
            sys.exit(0)
        states.append(on)
    t0 = time.perf_counter()
    with Range("step"):
        x = torch.randint(0, cfg.vocab_size, (8, lengths[i % len(lengths)]), device=dev)
        with Range("forward"):
            loss = model(input_ids=x, labels=x).loss
        with Range("backward"):
            loss.backward()
        with Range("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
torch.cuda.synchronize()
# Steps cycle through eight sequence lengths, so single step times are multimodal and their median
# jumps between modes from run to run; a whole cycle (one step of each length) is the stable unit
# for comparing runs. The first cycle warms up and is left out.
cycles = [sum(times[c:c + len(lengths)]) for c in range(len(lengths), len(times) - len(lengths) + 1,
                                                        len(lengths))]
print(json.dumps({"type": "gpt2", "reserved_high": torch.cuda.max_memory_reserved(dev),
                  "used_high": torch.cuda.max_memory_allocated(dev), "min_allocs": steps * 100,
                  "step_ms_median": round(statistics.median(times[len(lengths):] or times) * 1e3, 3),
                  "cycle_ms_median": round(statistics.median(cycles) * 1e3, 3) if cycles else None,
                  "cycles": len(cycles),
                  "torch": torch.__version__}))
if record is not None:
    record(1)
    full = [(states[c // len(lengths)], sum(times[c:c + len(lengths)]) * 1e3)
            for c in range(len(lengths), len(times) - len(lengths) + 1, len(lengths))]
    on_ms = [t for s_, t in full if s_]
    off_ms = [t for s_, t in full if not s_]
    ratios = [(full[k][1] / full[k + 1][1]) if full[k][0] else (full[k + 1][1] / full[k][1])
              for k in range(0, len(full) - 1, 2) if full[k][0] != full[k + 1][0]]
    med = statistics.median(ratios) if ratios else None
    print(json.dumps({"type": "ab", "pairs": len(ratios),
                      "on_cycle_ms": [round(t, 2) for t in on_ms],
                      "off_cycle_ms": [round(t, 2) for t in off_ms],
                      "median_on_ms": round(statistics.median(on_ms), 3) if on_ms else None,
                      "median_off_ms": round(statistics.median(off_ms), 3) if off_ms else None,
                      "pair_ratios": [round(r, 4) for r in ratios],
                      "overhead_pct": round((med - 1) * 100, 2) if med else None,
                      "overhead_pct_q1_q3": [round((statistics.quantiles(ratios, n=4)[0] - 1) * 100, 2),
                                             round((statistics.quantiles(ratios, n=4)[2] - 1) * 100, 2)]
                      if len(ratios) >= 4 else None}))
if set_level is not None:
    set_level(block_order[-1])
    n = len(block_order)
    full = [sum(times[c * len(lengths):(c + 1) * len(lengths)]) * 1e3 for c in range(len(states))]
    blocks = []
    for b in range((len(states) - 1) // n):
        cs = range(1 + b * n, 1 + (b + 1) * n)
        blocks.append({str(states[c]): round(full[c], 3) for c in cs})
    print(json.dumps({"type": "levels", "levels": block_order, "blocks": blocks}))
if nvtx:
    print(json.dumps({"type": "nvtx", "ranges": len(Range.pushed),
                      "names": sorted(set(Range.pushed))}))
sys.stdout.flush()
