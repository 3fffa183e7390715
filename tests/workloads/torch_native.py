# PyTorch with its default (native) caching allocator, traced unchanged (issue #18): its
# segments come from cudaMalloc (c10's CUDACachingAllocator) and go back with cudaFree at
# empty_cache(). Only elementwise kernels and reductions run, so no CUDA library (cuBLAS, cuDNN)
# allocates device memory of its own behind the allocator: every cudaMalloc in the trace is a
# segment. Ground truth: torch.cuda.memory_stats() after a synchronize:
#   reserved_peak  = reserved_bytes.all.peak (the highest sum of segment sizes)
#   segments       = segment.all.allocated (cudaMalloc calls), segments_freed = segment.all.freed
import json
import os
import sys

import torch

conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
assert "cudaMallocAsync" not in conf and "expandable" not in conf, \
    "run with the native allocator: unset PYTORCH_CUDA_ALLOC_CONF"
assert torch.cuda.get_allocator_backend() == "native", torch.cuda.get_allocator_backend()
dev = torch.device("cuda", 0)
torch.manual_seed(0)


def churn(steps, base):
    keep = []
    for i in range(steps):
        # Sizes from 1 KiB to 96 MiB: small-pool (2 MiB segments) and large-pool segments.
        a = torch.randn(base + (i % 7) * (1 << 18), device=dev)
        b = torch.empty((i % 5 + 1) << 20, dtype=torch.uint8, device=dev).fill_(i)
        c = (a * 2 + 1).relu().sum()
        d = torch.ones(256 + i, device=dev) * c
        if i % 4 == 0:
            keep.append(torch.empty((24 + i) << 20, dtype=torch.uint8, device=dev))
        del a, b, d
    return keep


keep = churn(12, 1 << 20)
torch.cuda.synchronize()
del keep
torch.cuda.empty_cache()  # cudaFree of every unused segment: device-wide synchronizations
keep = churn(8, 3 << 20)
torch.cuda.synchronize()
s = torch.cuda.memory_stats(dev)
print(json.dumps({"type": "torch_native",
                  "reserved_peak": s["reserved_bytes.all.peak"],
                  "reserved_now": s["reserved_bytes.all.current"],
                  "segments": s["segment.all.allocated"],
                  "segments_freed": s["segment.all.freed"],
                  "num_device_alloc": s.get("num_device_alloc"),
                  "num_device_free": s.get("num_device_free"),
                  "torch": torch.__version__}))
sys.stdout.flush()
