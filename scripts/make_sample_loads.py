#!/usr/bin/env python3
"""Generates the synthetic sample loads in resources/loads/ (plain Python, no NumPy needed).

Deterministic: rerunning rewrites the same bytes. See resources/loads/README.md for what each
file is.
"""
import json
import math
import random
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "resources" / "loads"


def write_npy(path, shape, values, descr="<i4"):
    """Writes a C-order little-endian .npy (format 1.0) with a 64-byte aligned header."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    fmt = {"<i4": "<%di", "<i8": "<%dq", "<f4": "<%df", "<f8": "<%dd"}[descr]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(fmt % len(values), *values))


def multinomial(rng, n, probs):
    """Counts of n draws from probs (sequential binomials by inversion)."""
    counts = [0] * len(probs)
    cum = []
    acc = 0.0
    for p in probs:
        acc += p
        cum.append(acc)
    for _ in range(n):
        u = rng.random() * acc
        lo, hi = 0, len(cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cum[mid] < u:
                lo = mid + 1
            else:
                hi = mid
        counts[lo] += 1
    return counts


def powerlaw_dsv3_hidden(rng):
    # DeepSeek-V3 shape, one row per hidden layer (61): the first 3 are dense (zero rows); each
    # MoE layer: power law alpha 1.2 over a shuffled expert order, 65,536 routed pairs.
    experts, layers, dense = 256, 61, 3
    values = []
    for layer in range(layers):
        if layer < dense:
            values += [0] * experts
            continue
        order = list(range(experts))
        rng.shuffle(order)
        weights = [0.0] * experts
        for rank, e in enumerate(order):
            weights[e] = (rank + 1.0) ** -1.2
        total = sum(weights)
        values += [round(65536 * w / total) for w in weights]
    write_npy(OUT / "synthetic_powerlaw1.2_dsv3_hidden.npy", (layers, experts), values)


def hot_qwen3_csv(rng):
    # Qwen3-30B-A3B shape (48 × 128): 4 hot experts take 30 % of 32,768 pairs per layer,
    # drawn as a multinomial (so counts are noisy integers).
    experts, layers, hot, share = 128, 48, 4, 0.3
    lines = ["# synthetic hot:n=4,share=0.3 on Qwen3-30B-A3B's shape; one row per MoE layer"]
    for _ in range(layers):
        order = list(range(experts))
        rng.shuffle(order)
        probs = [0.0] * experts
        for rank, e in enumerate(order):
            probs[e] = share / hot if rank < hot else (1 - share) / (experts - hot)
        lines.append(",".join(str(c) for c in multinomial(rng, 32768, probs)))
    (OUT / "synthetic_hot4_qwen3_30b.csv").write_text("\n".join(lines) + "\n")


def dsv2lite_steps(rng):
    # 16 steps [16, 26, 64] from the measured DeepSeek-V2-Lite (ESFT) frequencies: each step's
    # frequencies drift (Gamma noise, shape 50, per expert), then 1,024 tokens × top-6 pairs
    # are drawn as a multinomial.
    src = json.loads((OUT / "dsv2lite_esft.json").read_text())["logical_count"]
    steps, values = 16, []
    for _ in range(steps):
        for row in src:
            total = float(sum(row))
            probs = [rng.gammavariate(50.0, 1.0 / 50.0) * c / total for c in row]
            values += multinomial(rng, 1024 * 6, probs)
    write_npy(OUT / "dsv2lite_esft_steps16.npy", (steps, len(src), len(src[0])), values)


def topic_trace(rng):
    # A per-token top-8 trace on OLMoE's shape (64 experts, 3 layers, 512 tokens): each token
    # has one of 8 topics; a topic prefers its own 8 experts (weight 30) over the rest (weight 1),
    # so co-activated experts cluster and placement locality matters.
    experts, layers, tokens, k, topics = 64, 3, 512, 8, 8
    ids = []
    for layer in range(layers):
        perm = list(range(experts))
        rng.shuffle(perm)
        layer_ids = []
        for _ in range(tokens):
            topic = rng.randrange(topics)
            own = set(perm[topic * 8:(topic + 1) * 8])
            weights = [30.0 if e in own else 1.0 for e in range(experts)]
            chosen = []
            for _ in range(k):
                pick = rng.choices(range(experts), weights=weights)[0]
                weights[pick] = 0.0
                chosen.append(pick)
            layer_ids.append(chosen)
        ids.append(layer_ids)
    text = json.dumps({"name": "synthetic_topic_trace", "num_experts": experts,
                       "source": "scripts/make_sample_loads.py (topic clusters)",
                       "topk_ids": ids}, separators=(",", ":"))
    (OUT / "synthetic_topic_trace_olmoe_shape.json").write_text(text + "\n")


def drift_qwen3_steps(rng):
    # 32 steps [32, 48, 128] on Qwen3-30B-A3B's shape with drift: the traffic's topic changes
    # every 8 steps, and with it each layer's 8 hot experts (40 % of the pairs between them, the
    # rest uniform); 1,024 tokens × top-8 pairs per layer and step drawn as a multinomial. For
    # `moeplan rebalance`: a placement fitted on the first topic falls behind, re-fits catch up.
    experts, layers, steps, hot, share = 128, 48, 32, 8, 0.4
    values = []
    for s in range(steps):
        k = s // 8
        for layer in range(layers):
            hot_set = {(k * 37 + 11 * j + 5 * layer) % experts for j in range(hot)}
            probs = [share / hot if e in hot_set else (1 - share) / (experts - hot)
                     for e in range(experts)]
            values += multinomial(rng, 1024 * 8, probs)
    write_npy(OUT / "synthetic_drift_qwen3_30b_steps32.npy", (steps, layers, experts), values)


def main():
    rng = random.Random(20251202)
    powerlaw_dsv3_hidden(rng)
    hot_qwen3_csv(rng)
    dsv2lite_steps(rng)
    topic_trace(rng)
    drift_qwen3_steps(random.Random(20261203))


if __name__ == "__main__":
    main()
