#!/usr/bin/env python3
"""The JAX peer of bench_optim's VeLO (GPU machine, where JAX and google/learned_optimization are installed):
learned_optimization's VeLO (hyper_v2.HyperV2 with VeLO's sizes: LSTM 512, 256 parameter inits) stepping the same
tensor shapes, jitted, one JSON line per model.

    ./bench_optim -e gpt2-124m --shapes 1 > shapes.jsonl
    python3 bench/jax_velo_bench.py --shapes shapes.jsonl [--steps 10]

Random meta-weights (lopt.init; VeLO's published ones are a download, and the step time does not depend on
their values). Parameters N(0, 0.02), gradients N(0, 1e-3), fixed; each timed step ends with
block_until_ready; the median of --steps after 2 untimed ones (the first compiles).

Each line: {"bench":"peer_optim_step","impl":"jax_lopt","optimizer":"velo","model","params","median_ms",
"min_ms","steps","gpu","jax"}, or {"bench","impl","optimizer","model","error"} when JAX or learned_optimization
cannot be imported or the step fails; exits 0 either way.
"""
import argparse
import json
import statistics
import sys
import time


def emit(rec):
    print(json.dumps(rec, separators=(",", ":")), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="bench_optim --shapes 1 output (JSON lines)")
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    models = {}
    with open(a.shapes) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                models.setdefault(r["model"], []).append(r)
    head = {"bench": "peer_optim_step", "impl": "jax_lopt", "optimizer": "velo"}
    try:
        import jax
        import jax.numpy as jnp
        from learned_optimization.research.general_lopt import hyper_v2
    except Exception as e:  # noqa: BLE001 - no JAX here: say so, once per model
        for model in models:
            emit(dict(head, model=model, error=f"JAX peer unavailable: {type(e).__name__}: {e}"[:300]))
        return 0
    for model, tensors in models.items():
        try:
            key = jax.random.PRNGKey(0)
            params, grads = {}, {}
            for i, t in enumerate(tensors):
                k1, k2, key = jax.random.split(key, 3)
                params[f"{i:04d}"] = 0.02 * jax.random.normal(k1, t["shape"], jnp.float32)
                grads[f"{i:04d}"] = 1e-3 * jax.random.normal(k2, t["shape"], jnp.float32)
            lopt = hyper_v2.HyperV2(lstm_hidden_size=512, param_inits=256, use_bugged_loss_features=False)
            opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(1)))
            state = opt.init(params, num_steps=10000)
            update = jax.jit(lambda s, g: opt.update(s, g, loss=jnp.float32(3.0)))
            for _ in range(2):
                state = update(state, grads)
            jax.block_until_ready(state)
            times = []
            for _ in range(a.steps):
                t0 = time.perf_counter()
                state = update(state, grads)
                jax.block_until_ready(state)
                times.append((time.perf_counter() - t0) * 1e3)
            emit(dict(head, model=model, params=int(sum(x.size for x in params.values())),
                      median_ms=round(statistics.median(times), 4), min_ms=round(min(times), 4), steps=a.steps,
                      gpu=str(jax.devices()[0].device_kind), jax=jax.__version__))
        except Exception as e:  # noqa: BLE001
            msg = str(e).strip().splitlines()
            emit(dict(head, model=model, error=f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
