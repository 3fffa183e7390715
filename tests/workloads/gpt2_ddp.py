# Several GPUs (issue #19): a two-rank GPT-2 trained with DistributedDataParallel, started by
# torchrun, one GPU per rank (LOCAL_RANK), NCCL, under PYTORCH_CUDA_ALLOC_CONF=backend:
# cudaMallocAsync. A transformers GPT-2 (4 layers, 256 wide, random initialisation: nothing is
# downloaded), AdamW, varying sequence lengths, different data per rank.
#   NCCL_NVLS_ENABLE=0 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
#     torchrun --standalone --nproc-per-node 2 gpt2_ddp.py [STEPS]
# With GPT2_DDP_SHARE_GPU=1 every rank runs on GPU 0 and the ranks talk through gloo (NCCL
# refuses two ranks on one GPU): the same job shape (torchrun, one process and one trace per rank)
# on a machine with one GPU.
# Ground truth, one line per rank: {"type":"gpt2_ddp","rank":r,"world":2,"device":d,"pid":p,
# "pool":"0x..","reserved_high":R,"used_high":U,"min_allocs":N}: the rank's device, its process
# id (each rank's trace is its own file, named with it), the device's current pool (the driver's
# cuDeviceGetMemPool, read through ctypes: not a call the collector records) and torch's
# max_memory_reserved / max_memory_allocated, which read that pool's high watermarks: each rank's
# trace must have exactly these peaks. Prints {"type":"skip"} without transformers.
import ctypes
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as ex:
    print(json.dumps({"type": "skip", "why": str(ex)}))
    sys.exit(0)

assert "cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "set backend:cudaMallocAsync"
assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "set NCCL_NVLS_ENABLE=0 (NVLink multicast off)"
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
world = int(os.environ["WORLD_SIZE"])

share = os.environ.get("GPT2_DDP_SHARE_GPU") == "1"
gpu = 0 if share else local
torch.cuda.set_device(gpu)
dev = torch.device("cuda", gpu)
if share:
    dist.init_process_group("gloo")
else:
    try:
        dist.init_process_group("nccl", device_id=dev)  # binds the communicator to the rank's GPU
    except TypeError:  # a torch before 2.3
        dist.init_process_group("nccl")
torch.manual_seed(0)  # the same initial weights on every rank
cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=8192, n_positions=512)
model = DistributedDataParallel(GPT2LMHeadModel(cfg).to(dev), device_ids=[gpu])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
gen = torch.Generator(device=dev).manual_seed(1000 + rank)  # different data per rank
lengths = [64, 256, 128, 384, 96, 192]
for i in range(steps):
    x = torch.randint(0, cfg.vocab_size, (8, lengths[i % len(lengths)]), device=dev, generator=gen)
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize(dev)
dist.barrier()

pool = ctypes.c_void_p()
libcuda = ctypes.CDLL("libcuda.so.1")
rc = libcuda.cuDeviceGetMemPool(ctypes.byref(pool), ctypes.c_int(gpu))
line = {"type": "gpt2_ddp", "rank": rank, "world": world, "device": gpu, "pid": os.getpid(),
        "reserved_high": torch.cuda.max_memory_reserved(dev),
        "used_high": torch.cuda.max_memory_allocated(dev), "min_allocs": steps * 50,
        "torch": torch.__version__}
if rc == 0 and pool.value:
    line["pool"] = hex(pool.value)
# One write of line and newline together: the ranks share the launcher's stdout, and print()'s
# separate write of the newline let two ranks' lines run together.
sys.stdout.write(json.dumps(line) + "\n")
sys.stdout.flush()
dist.destroy_process_group()
