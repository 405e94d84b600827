#!/usr/bin/env python3
"""Calibrate moeplan's DeepEP kernels (deepep_normal, deepep_ll) on aiconfigurator's DeepEP tables.

    python3 scripts/aiconfigurator/fit_deepep.py [--system h200_sxm] [--version 0.5.6.post2]
        [--cluster resources/clusters/2x-hgx-h200.json] [--train-nodes 4,8] [--write]

The tables (comm/sglang/<version>/wideep_deepep_{normal,ll}_perf.parquet) time DeepEP's kernels
for DeepSeek-V3's shape (hidden 7168, top-8, 256 experts) on 1, 2, 4 and 8 nodes of 8 GPUs. Per
kernel (normal dispatch and combine at DeepEP's default 20 SMs, low-latency dispatch and
combine) this fits the form the planner uses (planner/costs/roofline_costs.cpp, ep_kernel):

    t = fixed_s + per_node_s · nodes + NIC bytes per rank / (nic_efficiency · NIC bandwidth)

with the bytes computed as planner/costs/cost_model_deepep.cpp does: normal mode sends each
token once per destination node (fp8 with scales for the table's dispatch, bf16 back), with the
collector's routing (random scores, the top min(nodes, 4) nodes, then top-8 inside them); low
latency sends every (token, expert) pair (16 + H + H/128·4 bytes fp8, 2H bf16 back). The fit uses
the --train-nodes rows only (least squares on relative error); the rows of the other node counts
are held out and judged. --write stores the parameters in
resources/devices/calibration/<device>.json under "ep_kernels_deepep" (other keys untouched).
Nothing here is hard-coded from a previous run.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aic_tables as aic  # noqa: E402
from aic_tables import BadInput  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEEPEP_DEFAULT_SMS = 20  # deep_ep.Buffer.num_sms (planner: kDeepEpDefaultSms)
DEVICES = {"h200_sxm": ("h200", "NVIDIA H200"), "h100_sxm": ("h100", "NVIDIA H100")}


def hit(E: float, k: int, m: float) -> float:
    """P(k distinct experts of E hit a set of m): 1 - prod (E-m-i)/(E-i) (hit_probability)."""
    if m <= 0:
        return 0.0
    miss = 1.0
    for i in range(k):
        if E - i <= 0:
            break
        miss *= max(0.0, (E - m - i) / (E - i))
    return 1.0 - miss


def cross_nodes(E: int, k: int, nodes: int) -> float:
    """Expected other nodes one token reaches under the collector's routing."""
    groups = min(nodes, 4)
    if groups == nodes:
        p = hit(E, k, E / nodes)
    else:  # top `groups` nodes by score (uniform), then k experts among their experts
        p = groups / nodes * hit(E * groups / nodes, k, E / nodes)
    return (nodes - 1) * p


def normal_token_bytes(H: int, k: int, dispatch: bool) -> float:
    """cost_model_deepep.cpp normal_token_bytes: fp8 + scales + top-k + metadata to dispatch,
    bf16 + weights + metadata back."""
    b = H + 4 * (H // 128) + 8 * k + 8 if dispatch else 2 * H + 4 * k + 8
    return 16 * math.ceil(b / 16)


def ll_message_bytes(H: int, dispatch: bool) -> float:
    return 16 + H + 4 * (H // 128) if dispatch else 2 * H


def notify_us(r, phase: str) -> float:
    """The notify kernel's time (a count exchange and barrier before the transmit); 0 absent."""
    try:
        return float(r.get(f"{phase}_notify_us") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def rows_for(root, system: str, version: str, gpu: str):
    out = []
    for mode, cols in (("normal", aic.DEEPEP_NORMAL_COLUMNS), ("ll", aic.DEEPEP_LL_COLUMNS)):
        opt = ("dispatch_notify_us", "combine_notify_us") if mode == "normal" else ()
        t = aic.read_table(root, system, "comm", "sglang", version, f"wideep_deepep_{mode}_perf",
                           cols, opt)
        for r in t.rows:
            if r["device"] != gpu or r["node_num"] < 2 or r["num_token"] <= 0:
                continue
            if mode == "normal" and r["dispatch_sms"] != DEEPEP_DEFAULT_SMS:
                continue
            H, k, E, N, T = (r["hidden_size"], r["num_topk"], r["num_experts"], r["node_num"],
                             r["num_token"])
            if E % (8 * N) != 0:
                continue
            for phase in ("dispatch", "combine"):
                if mode == "normal":
                    us = r[f"{phase}_transmit_us"] + notify_us(r, phase)
                    nic = T * cross_nodes(E, k, N) * normal_token_bytes(H, k, phase == "dispatch")
                else:
                    us = r[f"{phase}_avg_t_us"]
                    nic = T * k * (N - 1) / N * ll_message_bytes(H, phase == "dispatch")
                if not us > 0:
                    continue
                out.append({"kernel": f"{mode}_{phase}", "nodes": N, "tokens": T, "hidden": H,
                            "topk": k, "experts": E, "seconds": us * 1e-6, "nic_bytes": nic,
                            "table": t.rel})
    return out


def solve(a, b):
    """Gaussian elimination with partial pivoting (a small dense system)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(m[i][c]))
        m[c], m[p] = m[p], m[c]
        for i in range(c + 1, n):
            f = m[i][c] / m[c][c]
            for j in range(c, n + 1):
                m[i][j] -= f * m[c][j]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def fit(rows, nic_bw):
    """Least squares of relative error: t ≈ a + c·nodes + x/η with x = NIC bytes / bandwidth
    (the fixed part grows with the nodes the notify and the first chunk cross); a negative
    per-node term is dropped and the rest refitted."""
    def lsq(features):
        s = [[0.0] * len(features) for _ in features]
        v = [0.0] * len(features)
        for r in rows:
            f = [fn(r) / r["seconds"] for fn in features]
            for i in range(len(f)):
                v[i] += f[i]
                for j in range(len(f)):
                    s[i][j] += f[i] * f[j]
        return solve(s, v)

    one = lambda r: 1.0  # noqa: E731
    nodes = lambda r: float(r["nodes"])  # noqa: E731
    nic = lambda r: r["nic_bytes"] / nic_bw  # noqa: E731
    a, c, b = lsq([one, nodes, nic])
    if c < 0:
        (a, b), c = lsq([one, nic]), 0.0
    return {"fixed_s": max(0.0, a), "per_node_s": c, "nic_efficiency": min(1.0, 1.0 / b)}


def predict(p, r, nic_bw):
    return (p["fixed_s"] + p["per_node_s"] * r["nodes"] +
            r["nic_bytes"] / nic_bw / p["nic_efficiency"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--system", default="h200_sxm")
    ap.add_argument("--version", default="0.5.6.post2")
    ap.add_argument("--cluster", default=os.path.join(REPO, "resources/clusters/2x-hgx-h200.json"))
    ap.add_argument("--train-nodes", default="4,8")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    try:
        if args.system not in DEVICES:
            raise BadInput(f"--system {args.system}: expected one of {', '.join(DEVICES)}")
        device, gpu = DEVICES[args.system]
        with open(args.cluster, encoding="utf-8") as f:
            cluster = json.load(f)
        nic_bw = float(cluster["inter_node"]["nic_bandwidth_gb_per_s"]) * 1e9
        train = {int(x) for x in args.train_nodes.split(",")}
        root = aic.find_data_root(args.data_dir)
        rows = rows_for(root, args.system, args.version, gpu)
        if not rows:
            raise BadInput(f"{args.system} sglang {args.version}: no multi-node DeepEP rows")
    except BadInput as e:
        print(f"fit_deepep: error: {e}", file=sys.stderr)
        return 2
    kernels = {}
    report = [f"DeepEP kernels, {args.system} sglang {args.version}, NIC {nic_bw / 1e9:g} GB/s, "
              f"trained on {sorted(train)} nodes", ""]
    held_errors = []
    for kernel in ("normal_dispatch", "normal_combine", "ll_dispatch", "ll_combine"):
        mine = [r for r in rows if r["kernel"] == kernel]
        tr = [r for r in mine if r["nodes"] in train and r["tokens"] <= 8192]
        if len(tr) < 2:
            continue
        p = fit(tr, nic_bw)
        held = [r for r in mine if r["nodes"] not in train and r["tokens"] <= 8192]
        errs = sorted(abs(predict(p, r, nic_bw) / r["seconds"] - 1) for r in held)
        held_errors += errs
        kernels[kernel] = {
            "fixed_s": p["fixed_s"], "per_node_s": p["per_node_s"],
            "nic_efficiency": p["nic_efficiency"],
            "train_points": len(tr),
            "held_out": {"points": len(held),
                         "median_abs_err": errs[len(errs) // 2] if errs else None,
                         "worst_abs_err": errs[-1] if errs else None},
        }
        report.append(f"{kernel}: fixed {p['fixed_s'] * 1e6:.1f} us + "
                      f"{p['per_node_s'] * 1e6:.1f} us per node, NIC efficiency "
                      f"{p['nic_efficiency']:.3f}; held-out {len(held)} points median "
                      f"{(errs[len(errs) // 2] if errs else 0) * 100:.1f}% worst "
                      f"{(errs[-1] if errs else 0) * 100:.1f}%")
    report.append("")
    report.append("held-out sums (dispatch + combine) at 2 nodes, ms: tokens measured predicted")
    for mode in ("normal", "ll"):
        if f"{mode}_dispatch" not in kernels or f"{mode}_combine" not in kernels:
            continue
        for T in sorted({r["tokens"] for r in rows if r["kernel"].startswith(mode)}):
            both = [r for r in rows if r["kernel"].startswith(mode) and r["tokens"] == T and
                    r["nodes"] == 2 and r["experts"] == 256]
            if len(both) != 2 or 2 in train:
                continue
            meas = sum(r["seconds"] for r in both)
            pred = sum(predict(kernels[r["kernel"]], r, nic_bw) for r in both)
            report.append(f"  {mode} {T}: {meas * 1e3:.3f} {pred * 1e3:.3f} "
                          f"({(pred / meas - 1) * 100:+.1f}%)")
    print("\n".join(report))
    if args.write:
        path = os.path.join(REPO, "resources", "devices", "calibration", device + ".json")
        with open(path, encoding="utf-8") as f:
            cal = json.load(f)
        cal["ep_kernels_deepep"] = {
            "source": f"{args.system}/comm/sglang/{args.version}/wideep_deepep_{{normal,ll}}_perf"
                      f".parquet (aiconfigurator-core {root.package_version})",
            "form": "t = fixed_s + per_node_s * nodes + max(NIC bytes per rank / "
                    "(nic_efficiency * NIC bandwidth), NVLink time); "
                    "docs/GPU_COSTS.md",
            "command": "python3 scripts/aiconfigurator/fit_deepep.py --system "
                       f"{args.system} --version {args.version} --train-nodes "
                       f"{args.train_nodes} --write",
            "nic_bandwidth_bytes_per_s": nic_bw,
            "train_nodes": sorted(train),
            "generated_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "kernels": kernels,
        }
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(cal, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(path + ".tmp", path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
