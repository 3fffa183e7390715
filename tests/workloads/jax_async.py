# A real client (issue #11, point 5): JAX with XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async and
# XLA_PYTHON_CLIENT_PREALLOCATE=false, so XLA allocates from the default pool through the driver.
# Ground truth: allocations are recorded (at least one per jitted step) and every free matches
# an allocation in the trace. Prints {"type":"skip"} without JAX.
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
try:
    import jax
    import jax.numpy as jnp
except ImportError as ex:
    print(json.dumps({"type": "skip", "why": str(ex)}))
    sys.exit(0)

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200


@jax.jit
def step(w, x):
    y = jnp.tanh(x @ w)
    g = x.T @ (y * (1 - y * y)) / x.shape[0]
    return w - 0.01 * g


key = jax.random.PRNGKey(0)
w = jnp.ones((512, 512), jnp.float32) * 0.01
for i in range(steps):
    key, sub = jax.random.split(key)
    x = jax.random.normal(sub, (256 + 64 * (i % 4), 512), jnp.float32)
    w = step(w, x)
w.block_until_ready()
print(json.dumps({"type": "jax", "min_allocs": steps, "devices": str(jax.devices()),
                  "jax": jax.__version__}))
sys.stdout.flush()
