#!/usr/bin/env bash
# moeplan export (sglang 0.5.23): deepseek-v3 on 16x-hgx-h200, 128 × h200
# layout rank 1: ep128×tp1 deepep_normal tp_innermost; prefill, 4096 tokens per GPU
# predicted (roofline-calibrated (aiconfigurator-core 0.12.0, trtllm 1.3.0rc20), placement contiguous): 2389.812 ms per step of the whole model, 1714 tokens/s/GPU, 24.75 GiB of 131.32 GiB per GPU
# weights: fp8-block (fp8 e4m3, 128×128 blocks, fp32 scales), the checkpoint's fp8-block (quantization_config (fp8))
# model fnv1a64:e8806ed9d47c6b01, cluster fnv1a64:c72cfef5d0a6d162
# placement: eplb, 384 slots per MoE layer (128 redundant)
set -euo pipefail
MODEL_PATH="${MODEL_PATH:?set MODEL_PATH to the deepseek-v3 checkpoint}"
NODE_RANK="${NODE_RANK:?set NODE_RANK to the index of this node, 0..15}"
DIST_INIT_ADDR="${DIST_INIT_ADDR:?set DIST_INIT_ADDR to host:port of node 0}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python3 -m sglang.launch_server \
  --model-path "$MODEL_PATH" \
  --tp-size 128 \
  --ep-size 128 \
  --attn-dp-size 128 \
  --moe-a2a-backend deepep \
  --deepep-mode normal \
  --ep-num-redundant-experts 128 \
  --init-expert-location "$HERE/sglang_expert_location.json" \
  --nnodes 16 \
  --node-rank "$NODE_RANK" \
  --dist-init-addr "$DIST_INIT_ADDR"
