#!/usr/bin/env python3
"""Regenerates tests/data/aiconfigurator/ : a few dozen real rows of aiconfigurator-core 0.12.0's
h200_sxm tables, in the package's own layout and Parquet schemas, for the importer's unit test.

    pip install aiconfigurator-core==0.12.0 pyarrow
    python3 scripts/aiconfigurator/make_fixture.py [--out tests/data/aiconfigurator]

Rows are selected by value (listed in SELECTIONS and in the fixture's README), never edited.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aic_tables as aic  # noqa: E402

SYSTEM = "h200_sxm"
# (op, framework, version, table, row predicate, description)
SELECTIONS = [
    ("moe", "trtllm", "1.3.0rc20", "moe_perf",
     lambda r: r["hidden_size"] == 2048 and r["inter_size"] == 768 and r["num_experts"] == 128
     and r["topk"] == 8 and r["moe_dtype"] == "bfloat16"
     and r["kernel_source"] == "moe_torch_flow_cutlass"
     and (r["moe_tp_size"], r["moe_ep_size"]) in ((1, 8), (8, 1), (2, 4))
     and r["num_tokens"] in (1, 8, 64, 512, 4096)
     and r["distribution"] in ("balanced", "power_law_1.2"),
     "Qwen3-30B-A3B shape (hidden 2048, inter 768, 128 experts, top-8), bf16, "
     "moe_torch_flow_cutlass, tp x ep in {1x8, 2x4, 8x1}, tokens {1, 8, 64, 512, 4096}, "
     "balanced and power_law_1.2"),
    ("gemm", "trtllm", "1.3.0rc20", "gemm_perf",
     lambda r: r["gemm_dtype"] == "bfloat16" and r["n"] == 1536 and r["k"] == 2048
     and r["m"] in (1, 16, 64, 256, 1024, 4096),
     "bf16, n=1536, k=2048, m in {1, 16, 64, 256, 1024, 4096}"),
    ("comm", "nccl", "2.29.2", "nccl_perf",
     lambda r: (r["op_name"], r["nccl_dtype"]) in (("all_reduce", "half"), ("all_gather", "half"),
                                                  ("alltoall", "int8"))
     and r["num_gpus"] in (2, 8) and r["message_size"] in (256, 4096, 65536, 1048576, 16777216,
                                                          134217728, 512, 8192, 131072),
     "all_reduce/all_gather half and alltoall int8, 2 and 8 GPUs, message sizes "
     "256 .. 134217728 elements"),
    ("comm", "trtllm", "1.3.0rc11", "moe_a2a_perf",
     lambda r: r["hidden_size"] == 7168 and r["topk"] == 8 and r["num_experts"] == 256
     and r["comm_dtype"] == "bfloat16" and r["num_tokens"] in (1, 128, 4096),
     "DeepEP (trtllm_deepep_ht / _ll) dispatch+combine, hidden 7168, top-8, 256 experts, bf16, "
     "tokens {1, 128, 4096}"),
    ("attention", "trtllm", "1.3.0rc20", "context_attention_perf",
     lambda r: (r["num_heads"], r["num_key_value_heads"], r["head_dim"]) == (32, 4, 128)
     and r["attn_dtype"] == "bfloat16" and r["kv_cache_dtype"] == "bfloat16"
     and r["window_size"] == 0 and r["isl"] in (1024, 4096) and r["batch_size"] in (1, 8),
     "Qwen3-30B-A3B's heads on one GPU (32 over 4 K/V heads of 128), bf16, bf16 KV, "
     "prompts of 1024 and 4096, batch 1 and 8"),
    ("attention", "trtllm", "1.3.0rc20", "generation_attention_perf",
     lambda r: (r["num_heads"], r["num_key_value_heads"], r["head_dim"]) == (32, 4, 128)
     and r["kv_cache_dtype"] == "bfloat16" and r["window_size"] == 0
     and r["step"] in (1023, 4095) and r["batch_size"] in (1, 64),
     "the same heads, bf16 KV, decode over 1024 and 4096 keys (step 1023, 4095), batch 1 and 64"),
    ("mla", "trtllm", "1.3.0rc20", "context_mla_perf",
     lambda r: r["num_heads"] == 16 and r["mla_dtype"] == "bfloat16"
     and r["kv_cache_dtype"] == "bfloat16" and r["step"] == 0 and r["isl"] in (1024, 4096)
     and r["batch_size"] in (1, 8),
     "DeepSeek MLA, 16 heads per GPU (128 over TP 8), bf16, bf16 KV, prompts of 1024 and 4096, "
     "batch 1 and 8"),
    ("mla", "trtllm", "1.3.0rc20", "generation_mla_perf",
     lambda r: r["num_heads"] == 16 and r["kv_cache_dtype"] == "bfloat16"
     and r["step"] in (1023, 4095) and r["batch_size"] in (1, 64),
     "the same, absorbed decode over 1024 and 4096 keys, batch 1 and 64"),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests",
                                                  "data", "aiconfigurator"))
    args = ap.parse_args()
    import pyarrow.compute as pc  # noqa: F401
    import pyarrow.parquet as pq

    root = aic.find_data_root(None)
    out_systems = os.path.join(args.out, "systems")
    if os.path.isdir(out_systems):
        shutil.rmtree(out_systems)
    os.makedirs(os.path.join(out_systems, "data", SYSTEM))
    for f in ("query_versions.yaml", SYSTEM + ".yaml"):
        shutil.copyfile(os.path.join(root.systems_dir, f), os.path.join(out_systems, f))
    with open(os.path.join(out_systems, "PACKAGE_VERSION"), "w", encoding="utf-8") as f:
        f.write(root.package_version + "-fixture\n")
    lines = []
    for op, fw, ver, name, pred, what in SELECTIONS:
        src_dir = os.path.join(root.data_dir(SYSTEM), op, fw, ver)
        dst_dir = os.path.join(out_systems, "data", SYSTEM, op, fw, ver)
        os.makedirs(dst_dir, exist_ok=True)
        t = pq.read_table(os.path.join(src_dir, name + ".parquet"))
        rows = t.to_pylist()
        keep = [i for i, r in enumerate(rows) if pred(r)]
        sub = t.take(keep)
        pq.write_table(sub.replace_schema_metadata(None), os.path.join(dst_dir, name + ".parquet"),
                       compression="zstd")
        shutil.copyfile(os.path.join(src_dir, "collection_meta.yaml"),
                        os.path.join(dst_dir, "collection_meta.yaml"))
        lines.append(f"| `{SYSTEM}/{op}/{fw}/{ver}/{name}.parquet` | {len(keep)} of {len(rows)} | "
                     f"{what} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
