# PyTorch with the cudaMallocAsync backend (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync):
# a small training-like loop. PyTorch decides how many driver allocations a tensor costs, so the
# ground truth here is what PyTorch itself reports after a synchronize (reserved/allocated from
# the pool) and lower bounds on the counts.
import json
import os
import sys

import torch

assert "cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "set backend:cudaMallocAsync"
assert torch.cuda.get_allocator_backend() == "cudaMallocAsync", torch.cuda.get_allocator_backend()
dev = torch.device("cuda", 0)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
tensors = 0
for step in range(20):
    x = torch.randn(256, 1024, device=dev)
    y = model(x)
    loss = y.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    tensors += 1
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    z = torch.empty(32 << 20, dtype=torch.uint8, device=dev)
    z.fill_(1)
torch.cuda.synchronize()
del z
torch.cuda.synchronize()
print(json.dumps({"type": "torch", "reserved": torch.cuda.memory_reserved(dev),
                  "allocated": torch.cuda.memory_allocated(dev), "min_allocs": tensors * 3,
                  "torch": torch.__version__}))
sys.stdout.flush()
