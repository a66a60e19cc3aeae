# SPDX-License-Identifier: Apache-2.0
"""Time to first token of vLLM's CPU build with and without kvport (docs/performance.md, "vLLM
on a CPU: time to first token"). Run from the repository root, after `make inference`:

    build/inference/venv/bin/python python/inference/ttft_bench.py --tokens 2048,8192

A Llama of random weights (--layers, --hidden; bfloat16) is made in a scratch folder, a `kvport
serve` (build/bin/kvport) is started, and each configuration is a fresh engine process
(python/inference/engine.py) answering one prompt per length, one at a time, max_tokens 1, so a
step's time is its prompt's time to first token:

- none: no connector;
- A (cold): LMCache storing into the node (the prompts' first sight);
- B tcp / B shm: a fresh process loading the prompts from the node (eic_trans_type 1 / 2);
- local CPU: LMCache without a node, the prompts asked twice in one process with vLLM's own
  prefix cache off: the second time is LMCache's local CPU tier;
- kvport A (cold) / kvport B: the same as A and B with kvport's own vLLM connector
  (kvport.vllm, no LMCache; its client picks shared memory with a node on this host), in a
  namespace of its own.

Prints a markdown table (seconds) and, for B, the share of the tokens vLLM took from the cache."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))
from conftest import CHUNK, Node, lmcache_yaml, run_engine  # noqa: E402


def make_model(path: Path, layers: int, hidden: int) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=hidden, intermediate_size=hidden * 4,
                         num_hidden_layers=layers, num_attention_heads=hidden // 64,
                         num_key_value_heads=max(hidden // 128, 1),
                         max_position_embeddings=65536, torch_dtype="bfloat16")
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="2048,8192", help="prompt lengths")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=1024)
    args = parser.parse_args()
    lengths = [int(n) for n in args.tokens.split(",")]
    rng = random.Random(7)
    prompts = [[rng.randrange(1, 32000) for _ in range(n)] for n in lengths]
    steps = [[p] for p in prompts]
    max_len = max(lengths) + CHUNK

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        model = make_model(work / "model", args.layers, args.hidden)
        (work / "node").mkdir()
        node = Node(work / "node").start()
        try:
            def engine(name: str, config, job_steps, **job):
                return run_engine(work, name, model, "bfloat16", job_steps, config,
                                  max_tokens=1, max_model_len=max_len, **job)

            connector = {"endpoint": node.endpoint, "namespace": "bench-vllm"}

            runs = {"none": engine("none", None, steps),
                    "A (cold)": engine("A", lmcache_yaml(work / "A.yaml", node, "bench", "tcp"),
                                       steps),
                    "B tcp": engine("Btcp", lmcache_yaml(work / "Bt.yaml", node, "bench", "tcp"),
                                    steps),
                    "B shm": engine("Bshm", lmcache_yaml(work / "Bs.yaml", node, "bench", "shm"),
                                    steps)}
            local = lmcache_yaml(work / "local.yaml", node, "bench", "tcp")
            text = Path(local).read_text().split("\n")
            Path(local).write_text("\n".join(l for l in text if not l.startswith(("remote_url",
                                                                                   "eic_"))))
            both = engine("local", local, steps + steps, prefix_caching=False)
            runs["local CPU"] = {"steps": both["steps"][len(steps):]}
            runs["kvport A (cold)"] = engine("kA", None, steps, kvport=connector)
            runs["kvport B"] = engine("kB", None, steps, kvport=connector)
        finally:
            node.stop()

    print(f"| prompt tokens | " + " | ".join(runs) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for i, n in enumerate(lengths):
        cells = [f"{runs[name]['steps'][i]['seconds']:.2f}" for name in runs]
        print(f"| {n} | " + " | ".join(cells) + " |")
    for name in ("B tcp", "B shm", "kvport B"):
        cached = [s["cached"][0] for s in runs[name]["steps"]]
        print(f"{name}: cached tokens {cached} of {lengths}")
    same = all(runs[name]["steps"][i]["tokens"] == runs["none"]["steps"][i]["tokens"]
               for name in runs for i in range(len(lengths)))
    print(f"first tokens identical to no connector: {same}")


if __name__ == "__main__":
    main()
