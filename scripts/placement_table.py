#!/usr/bin/env python3
"""Balancedness of contiguous, eplb and best on the bundled sample loads: a `moeplan place` loop.

Usage: scripts/placement_table.py [path/to/moeplan]   (default build/bin/moeplan)
Prints a Markdown table: fitted balancedness (and the bound), the mean and p99 per-step
balancedness on unseen steps (held-out file steps, else 1000 multinomial steps of 1024
tokens), and each policy's own compute time.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOEPLAN = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "bin" / "moeplan")
LOADS = ROOT / "resources" / "loads"

# (file, extra flags, machine flags with redundant slots)
CASES = [
    ("qwen3_30b_a3b_mbolt.json", "--model qwen3-30b-a3b", "--gpus 16 --nodes 2 --slots 144"),
    ("qwen3_next_80b_mbolt.json", "", "--gpus 32 --nodes 4 --slots 544"),
    ("dsv2lite_esft.json", "--model deepseek-v2-lite", "--gpus 8 --slots 72"),
    ("glm52_mbolt.json", "", "--gpus 32 --nodes 4 --slots 288"),
    ("olmoe_layers0_7_15_allenai.json", "", "--gpus 8 --slots 72"),
    ("mistral_layers0_7_15_allenai.json", "", "--gpus 8 --slots 16"),
    ("dsv2lite_esft_steps16.npy", "", "--gpus 16 --slots 80"),
    ("synthetic_hot4_qwen3_30b.csv", "", "--gpus 16 --nodes 2 --slots 144"),
    ("synthetic_powerlaw1.2_dsv3_hidden.npy", "--model deepseek-v3 --groups 1",
     "--gpus 64 --nodes 8 --slots 320"),
    ("synthetic_topic_trace_olmoe_shape.json", "", "--gpus 8 --nodes 2 --slots 72"),
]


def place(load, extra, machine, policy):
    flag = "--trace" if "trace" in load else "--load"
    if policy == "contiguous":
        machine = " ".join(machine.split()[:-2])  # no redundant slots
    cmd = (f"{MOEPLAN} place {flag} {LOADS / load} {extra} {machine} --policy {policy} "
           f"--eval-steps 1000 --step-tokens 1024 --json")
    out = subprocess.run(cmd.split(), capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def unseen(j):
    s = j.get("held_out") or j["sampled_steps"]
    return f"{s['mean_balancedness']:.4f} / {s['p99_balancedness']:.4f}"


def main():
    print("| load | machine | bound | contiguous | eplb | best | eplb unseen mean / p99 | "
          "best unseen mean / p99 | eplb ms | best ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for load, extra, machine in CASES:
        r = {p: place(load, extra, machine, p) for p in ("contiguous", "eplb", "best")}
        gpus, slots = machine.split()[1], machine.split()[-1]
        nodes = machine.split()[3] if "--nodes" in machine else "1"
        print(f"| {load} | {gpus} GPUs, {nodes} nodes, {slots} slots | "
              f"{r['best']['upper_bound']:.4f} | {r['contiguous']['balancedness']:.4f} | "
              f"{r['eplb']['balancedness']:.4f} | {r['best']['balancedness']:.4f} | "
              f"{unseen(r['eplb'])} | {unseen(r['best'])} | "
              f"{1000 * r['eplb']['seconds']:.2f} | {1000 * r['best']['seconds']:.1f} |")


if __name__ == "__main__":
    main()
