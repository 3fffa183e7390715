# A real client (issue #11, point 5): CuPy with cupy.cuda.MemoryAsyncPool (the device's current
# pool, stream-ordered) allocating on two streams. Ground truth: the pool's own high watermarks,
# cupy.cuda.runtime.memPoolGetAttribute(pool, 6 = ReservedMemHigh / 8 = UsedMemHigh).
# Prints {"type":"skip"} without CuPy.
import json
import sys

try:
    import cupy as cp
except ImportError as ex:
    print(json.dumps({"type": "skip", "why": str(ex)}))
    sys.exit(0)

pool = cp.cuda.MemoryAsyncPool()
cp.cuda.set_allocator(pool.malloc)
streams = [cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)]
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 300
allocs = 0
held = []
for i in range(iters):
    s = streams[i % 2]
    with s:
        n = (1 << 16) * (1 + (i * 5) % 24)  # 256 KiB .. 6 MiB of float32
        a = cp.ones(n, dtype=cp.float32)
        b = a * 2.0
        allocs += 2
        held.append((a, b))
        if len(held) > 1 + i % 5:
            held.clear()
held.clear()
for s in streams:
    s.synchronize()
cp.cuda.Device(0).synchronize()
handle = cp.cuda.runtime.deviceGetMemPool(0)
print(json.dumps({"type": "cupy", "pool": hex(handle),
                  "reserved_high": int(cp.cuda.runtime.memPoolGetAttribute(handle, 6)),
                  "used_high": int(cp.cuda.runtime.memPoolGetAttribute(handle, 8)),
                  "min_allocs": allocs, "cupy": cp.__version__}))
sys.stdout.flush()
