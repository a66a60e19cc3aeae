# SPDX-License-Identifier: Apache-2.0
"""Time to first token of vLLM's CPU build with and without kvport (docs/performance.md, "vLLM
on a CPU: time to first token"). Run from the repository root, after `make inference`:

    build/inference/venv/bin/python python/inference/ttft_bench.py --plot docs/ttft.png

A Llama of random weights (--layers, --hidden; bfloat16) is made in a scratch folder, a `kvport
serve` (build/bin/kvport) is started, and each configuration is a fresh engine process
(python/inference/engine.py) answering one prompt per length (--tokens: 2048, 8192 and 32768),
one at a time, max_tokens 1, so a step's time is its prompt's time to first token (after an
untimed 64-token prompt of its own, which takes each process's first-call costs):

- none: no connector;
- A (cold): LMCache storing into the node (the prompts' first sight);
- B tcp / B shm: a fresh process loading the prompts from the node (eic_trans_type 1 / 2);
- LMCache CPU / LMCache disk: LMCache without a node, the prompts asked twice in one process
  with vLLM's own prefix cache off: the second time comes from LMCache's local CPU tier, or
  from its local disk tier (local_cpu off, O_DIRECT reads and writes, so not the page cache);
- kvport A (cold) / kvport B: the same as A and B with kvport's own vLLM connector
  (kvport.vllm, no LMCache; its client picks shared memory with a node on this host), in a
  namespace of its own.

Every engine times its loads (engine.py's LoadClock): for each B, the time at least one get
from kvport was in flight, as a share of the prompt's time to first token, and the bytes it
read over that time; against it, `kvport bench` on the same node in the same run, with the
shape of the largest prompt's load (LMCache: one chunk of 256 tokens a call; kvport.vllm: one
call per layer of all the prompt's blocks). Prints markdown tables (seconds); --plot writes a
PNG of time to first token by prompt length (gnuplot)."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))
from conftest import CHUNK, KVPORT, Node, lmcache_yaml, run_engine  # noqa: E402

LMCACHE_CPU_GB = 1.5  # LMCache's CPU memory: a 32768-token prompt's chunks are 512 MiB
BLOCK = 128  # vLLM's CPU block size: kvport.vllm's objects are one block of one layer


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


def kvport_bench(url: str, transport: str, value_bytes: int, batch: int, count: int,
                 connections: int) -> float:
    """`kvport bench` against the node: GB/s of its get phase."""
    command = [KVPORT, "bench", "--url", url, "--transport", transport, "--value-size",
               str(value_bytes), "--batch", str(batch), "--count", str(count), "--connections",
               str(connections), "--ops", "put,get", "--warmup", "0", "--no-socket",
               "--peers", "none", "--ns", "bench-shape", "--json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(out.stdout[out.stdout.index("{"):])
    return next(p["gb_per_s"] for p in report["phases"]
                if p["system"] == "kvport" and p["op"] == "get")


def plot(path: str, title: str, lengths: List[int], runs: Dict[str, dict]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".dat") as data:
        for name, run in runs.items():
            data.write(f'"{name}"\n')
            for n, step in zip(lengths, run["steps"]):
                data.write(f"{n} {step['seconds']}\n")
            data.write("\n\n")
        data.flush()
        script = (f"set terminal pngcairo size 800,480 font ',10'; set output '{path}';"
                  "set logscale xy 2; set xlabel 'prompt tokens';"
                  "set ylabel 'time to first token (s)'; set logscale y 10; set grid;"
                  f"set xtics ({', '.join(str(n) for n in lengths)}); set key outside right;"
                  f"set xrange [{min(lengths) * 0.8}:{max(lengths) * 1.25}];"
                  f"set title '{title}';"
                  f"plot for [i=0:{len(runs) - 1}] '{data.name}' index i using 1:2 "
                  "with linespoints title columnheader(1)")
        subprocess.run(["gnuplot", "-e", script], check=True, timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="2048,8192,32768", help="prompt lengths")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--plot", help="a PNG of time to first token by prompt length")
    args = parser.parse_args()
    lengths = [int(n) for n in args.tokens.split(",")]
    rng = random.Random(7)
    prompts = [[rng.randrange(1, 32000) for _ in range(n)] for n in lengths]
    steps = [[p] for p in prompts]
    warm_up = [[random.Random(8).randrange(1, 32000) for _ in range(64)]]
    max_len = max(lengths) + CHUNK
    token_bytes = 2 * args.layers * max(args.hidden // 128, 1) * 64 * 2  # K and V, bf16

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        model = make_model(work / "model", args.layers, args.hidden)
        (work / "node").mkdir()
        node = Node(work / "node", capacity="3GiB").start()
        try:
            def engine(name: str, config, job_steps, **job):
                result = run_engine(work, name, model, "bfloat16", [warm_up] + job_steps,
                                    config, max_tokens=1, max_model_len=max_len,
                                    time_loads=True, **job)
                return dict(result, steps=result["steps"][1:])

            def remote(name: str, transport: str) -> str:
                return lmcache_yaml(work / f"{name}.yaml", node, "bench", transport,
                                    max_local_cpu_size=LMCACHE_CPU_GB)

            def twice(name: str, config: str) -> dict:
                both = engine(name, config, steps + steps, prefix_caching=False)
                return {"steps": both["steps"][len(steps):], "first": both["steps"][:len(steps)]}

            connector = {"endpoint": node.endpoint, "namespace": "bench-vllm"}
            runs = {"none": engine("none", None, steps),
                    "A (cold)": engine("A", remote("A", "tcp"), steps),
                    "B tcp": engine("Btcp", remote("Btcp", "tcp"), steps),
                    "B shm": engine("Bshm", remote("Bshm", "shm"), steps),
                    "LMCache CPU": twice("cpu", lmcache_yaml(
                        work / "cpu.yaml", None, "bench", "tcp",
                        max_local_cpu_size=LMCACHE_CPU_GB)),
                    "LMCache disk": twice("disk", lmcache_yaml(
                        work / "disk.yaml", None, "bench", "tcp", local_cpu=False,
                        max_local_cpu_size=LMCACHE_CPU_GB,
                        local_disk=f"file://{work / 'lmcache-disk'}/",
                        max_local_disk_size=2.0, extra_config={"use_odirect": True})),
                    "kvport A (cold)": engine("kA", None, steps, kvport=connector),
                    "kvport B": engine("kB", None, steps, kvport=connector)}
            stores = {"A (cold)": runs["A (cold)"],
                      "LMCache CPU first": {"steps": runs["LMCache CPU"]["first"]},
                      "LMCache disk first": {"steps": runs["LMCache disk"]["first"]}}
            largest = max(lengths)
            limits = {  # kvport bench, the largest prompt's load shape
                "B tcp": kvport_bench(node.endpoint, "tcp", CHUNK * token_bytes, 1,
                                      largest // CHUNK, 1),
                "B shm": kvport_bench(f"unix:{node.socket}", "shm", CHUNK * token_bytes, 1,
                                      largest // CHUNK, 1),
                "kvport B": kvport_bench(f"unix:{node.socket}", "shm",
                                         BLOCK * token_bytes // args.layers,
                                         largest // BLOCK, args.layers, 2)}
        finally:
            node.stop()

    print(f"| prompt tokens | " + " | ".join(runs) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for i, n in enumerate(lengths):
        cells = [f"{runs[name]['steps'][i]['seconds']:.2f}" for name in runs]
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    print("| B | prompt tokens | cached | TTFT s | kvport gets s (share) | read MiB | GB/s "
          "| kvport bench GB/s | lookups s | LMCache retrieve s | copy into vLLM s "
          "| waited for loads s |")
    print("|---" * 12 + "|")
    for name in ("B tcp", "B shm", "kvport B"):
        for i, n in enumerate(lengths):
            step = runs[name]["steps"][i]
            load = step["load"]
            seconds = load["kvport_get_seconds"]
            rate = load["kvport_get_bytes"] / seconds / 1e9 if seconds else 0.0
            print(f"| {name} | {n} | {step['cached'][0]} | {step['seconds']:.3f} "
                  f"| {seconds:.3f} ({seconds / step['seconds']:.0%}) "
                  f"| {load['kvport_get_bytes'] / 2**20:.0f} | {rate:.2f} "
                  f"| {limits[name]:.2f} | {load['kvport_exist_seconds']:.3f} "
                  f"| {load['retrieve_seconds']:.3f} | {load['copy_in_seconds']:.3f} "
                  f"| {load['waited_seconds']:.3f} |")
    print()
    print("| A | prompt tokens | TTFT s | copy out of vLLM's cache s (share) |")
    print("|---" * 4 + "|")
    for name, run in stores.items():
        for i, n in enumerate(lengths):
            step = run["steps"][i]
            copied = step["load"]["copy_out_seconds"]
            print(f"| {name} | {n} | {step['seconds']:.3f} | {copied:.3f} "
                  f"({copied / step['seconds']:.0%}) |")
    same = all(runs[name]["steps"][i]["tokens"] == runs["none"]["steps"][i]["tokens"]
               for name in runs for i in range(len(lengths)))
    print(f"first tokens identical to no connector: {same}")
    if args.plot:
        plot(args.plot, f"vLLM CPU, random Llama of {args.layers} layers (hidden "
             f"{args.hidden}), bfloat16, a shared 2-vCPU VM", lengths, runs)


if __name__ == "__main__":
    main()
