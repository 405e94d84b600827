#!/usr/bin/env python3
"""moeplan's `best` against DeepSeek's Python EPLB, in time, on every scenario of the placement
benchmark (scripts/placement_table.py's CASES).

Usage:
  scripts/placement_speed.py --eplb path/to/eplb.py --python path/to/python-with-torch
      [--moeplan build/bin/moeplan] [--runs 5]

`eplb.py` is DeepSeek's (github.com/deepseek-ai/EPLB, commit d52c72d); its Python needs torch
(CPU is enough; `python3 -m venv v && v/bin/pip install torch numpy`). For each scenario the
script builds the weight matrix EPLB is given — the load moeplan fits: a [S, L, E] file's first
S/2 steps summed, dense (all-zero) rows dropped, a top-k trace counted per expert — and times
`rebalance_experts(weight, slots, groups, nodes, gpus)` `--runs` times after one warm-up run.
moeplan's time is `moeplan place --policy best --json`'s `seconds` (the policy's own compute,
sampled steps included), one process per run. Every run is printed, and the speed-up is the
worst pairing: the fastest Python run over the slowest `best` run. Balancedness (fitted and on
unseen steps) is printed beside it for `eplb` and `best`.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from placement_table import CASES, LOADS  # noqa: E402

PY_TIMER = r"""
import importlib.util, json, sys, time
import numpy as np
import torch
spec = importlib.util.spec_from_file_location("eplb", sys.argv[1])
eplb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eplb)
weight = torch.from_numpy(np.load(sys.argv[2])).float()
slots, groups, nodes, gpus, runs = (int(x) for x in sys.argv[3:8])
eplb.rebalance_experts(weight, slots, groups, nodes, gpus)  # warm-up
times = []
for _ in range(runs):
    t = time.perf_counter()
    eplb.rebalance_experts(weight, slots, groups, nodes, gpus)
    times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def weight_matrix(py: str, load: Path, out: Path) -> tuple:
    """The [L, E] matrix moeplan fits, written as .npy by the torch Python (it has numpy)."""
    code = r"""
import json, sys
import numpy as np
path, out = sys.argv[1], sys.argv[2]
if path.endswith(".npy"):
    a = np.load(path).astype(np.float64)
elif path.endswith(".csv"):
    rows = [l for l in open(path).read().splitlines() if l.strip() and not l.startswith("#")]
    a = np.array([[float(x) for x in r.split(",")] for r in rows])
else:
    j = json.load(open(path))
    if "topk_ids" in j:
        ids = j["topk_ids"]
        e = j.get("num_experts") or 1 + max(max(max(t) for t in layer) for layer in ids)
        a = np.array([np.bincount(np.array(layer).ravel(), minlength=e) for layer in ids], float)
    else:
        a = np.array(j["logical_count"], dtype=np.float64)
if a.ndim == 3:
    a = a[: max(1, a.shape[0] // 2)].sum(axis=0)  # moeplan fits on the first S/2 steps
a = a[a.sum(axis=1) > 0]  # dense layers' empty rows
np.save(out, a)
print(json.dumps(list(a.shape)))
"""
    r = subprocess.run([py, "-c", code, str(load), str(out)], capture_output=True, text=True,
                       check=True)
    return tuple(json.loads(r.stdout))


def model_groups(extra: str) -> int:
    args = extra.split()
    if "--groups" in args:
        return int(args[args.index("--groups") + 1])
    if "--model" in args:
        cfg = json.loads((ROOT / "resources" / "models" /
                          f"{args[args.index('--model') + 1]}.json").read_text())
        return int(cfg.get("n_group") or 1)
    return 1


def place(moeplan: str, load: str, extra: str, machine: str, policy: str) -> dict:
    flag = "--trace" if "trace" in load else "--load"
    cmd = (f"{moeplan} place {flag} {LOADS / load} {extra} {machine} --policy {policy} "
           f"--eval-steps 1000 --step-tokens 1024 --json")
    return json.loads(subprocess.run(cmd.split(), capture_output=True, text=True,
                                     check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eplb", required=True, help="DeepSeek's eplb.py")
    ap.add_argument("--python", required=True, help="a Python with torch and numpy")
    ap.add_argument("--moeplan", default=str(ROOT / "build" / "bin" / "moeplan"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default="/tmp/moeplan-placement-speed")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    print("| load | L × E | machine | Python EPLB ms (each run) | best ms (each run) | "
          "speed-up (worst pair) | eplb / best fitted | eplb / best unseen mean |")
    print("|---|---|---|---|---|---|---|---|")
    worst = None
    for load, extra, machine in CASES:
        m = machine.split()
        gpus = int(m[m.index("--gpus") + 1])
        nodes = int(m[m.index("--nodes") + 1]) if "--nodes" in m else 1
        slots = int(m[m.index("--slots") + 1])
        groups = model_groups(extra)
        npy = work / (load + ".weight.npy")
        shape = weight_matrix(a.python, LOADS / load, npy)
        r = subprocess.run([a.python, "-c", PY_TIMER, a.eplb, str(npy), str(slots), str(groups),
                            str(nodes), str(gpus), str(a.runs)], capture_output=True, text=True,
                           check=True)
        py_ms = [1000 * t for t in json.loads(r.stdout)]
        best = [place(a.moeplan, load, extra, machine, "best") for _ in range(a.runs)]
        best_ms = [1000 * b["seconds"] for b in best]
        eplb = place(a.moeplan, load, extra, machine, "eplb")
        speedup = min(py_ms) / max(best_ms)
        worst = speedup if worst is None else min(worst, speedup)

        def unseen(j):
            return (j.get("held_out") or j["sampled_steps"])["mean_balancedness"]

        print(f"| {load} | {shape[0]} × {shape[1]} | {gpus} GPUs, {nodes} nodes, {slots} slots, "
              f"{groups} groups | {' / '.join(f'{t:.2f}' for t in py_ms)} | "
              f"{' / '.join(f'{t:.2f}' for t in best_ms)} | {speedup:.1f}× | "
              f"{eplb['balancedness']:.4f} / {best[0]['balancedness']:.4f} | "
              f"{unseen(eplb):.4f} / {unseen(best[0]):.4f} |", flush=True)
    print(f"\nworst speed-up over the scenarios: {worst:.1f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
