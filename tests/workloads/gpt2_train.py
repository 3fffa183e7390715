# A real client (issue #11, point 5): a transformers GPT-2 (6 layers, 512 wide, random
# initialisation: nothing is downloaded) trained with AdamW on varying sequence lengths, under
# PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync. Ground truth: torch.cuda.max_memory_reserved()
# and max_memory_allocated(), which read the pool's own high watermarks; the trace's peaks must
# equal them exactly. usage: gpt2_train.py [STEPS]   (prints {"type":"skip"} without transformers)
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
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
torch.manual_seed(0)
dev = torch.device("cuda", 0)
cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8192, n_positions=512)
model = GPT2LMHeadModel(cfg).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
lengths = [64, 256, 128, 512, 96, 384, 192, 448]
times = []
for i in range(steps):
    t0 = time.perf_counter()
    x = torch.randint(0, cfg.vocab_size, (8, lengths[i % len(lengths)]), device=dev)
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
torch.cuda.synchronize()
print(json.dumps({"type": "gpt2", "reserved_high": torch.cuda.max_memory_reserved(dev),
                  "used_high": torch.cuda.max_memory_allocated(dev), "min_allocs": steps * 100,
                  "step_ms_median": round(statistics.median(times[len(lengths):]) * 1e3, 3),
                  "torch": torch.__version__}))
sys.stdout.flush()
