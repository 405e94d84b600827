#!/usr/bin/env bash
# moeplan place --cluster: EPLB against best (objective tokens, and objective time: refined on the
# cost model's predicted MoE time) in predicted MoE time per step on unseen steps (the cost model
# of each cluster, prefill and decode), for docs/BENCHMARKS.md (issue 19, part 3).
#   scripts/placement_time_table.sh        (B=path/to/moeplan to use another binary)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build/bin/moeplan}
row() { name=$1; shift; for ph in prefill decode; do
  if [ $ph = prefill ]; then tok=$PF; else tok=$DC; fi
  e=$($B place "$@" --phase $ph --step-tokens $tok --policy eplb --json | python3 -c "import json,sys; j=json.load(sys.stdin); t=j['predicted_moe_ms']; print(t['mean_per_step'], t['steps'], t.get('balanced_reference_per_step', 'nan'))")
  b=$($B place "$@" --phase $ph --step-tokens $tok --policy best --json | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['predicted_moe_ms']['mean_per_step'])")
  t=$($B place "$@" --phase $ph --step-tokens $tok --policy best --objective time --json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['predicted_moe_ms']['mean_per_step'], j['time_search']['seconds'], j['balancedness'])")
  python3 -c "
e,n,r=map(float,'$e'.split()); b=float('$b'); t,s,bal=map(float,'$t'.split())
print(f'| $name | $ph | {int($tok)} | {int(n)} | {e:.3f} | {b:.3f} ({100*(b/e-1):+.2f}%) | {t:.3f} ({100*(t/e-1):+.2f}%) | {r:.3f} | {100*(e/r-1):+.2f}% / {100*(b/r-1):+.2f}% / {100*(t/r-1):+.2f}% | {s:.1f} |')"
done; }
echo "| load | phase | step tokens | unseen steps | eplb ms/step | best, tokens: ms/step (vs eplb) | best, time: ms/step (vs eplb) | balanced reference ms/step | eplb / best tokens / best time above it | time search s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
PF=65536 DC=2048 row "hot-expert (Qwen3-30B-A3B, 16 GPUs, 144 slots)" --load resources/loads/synthetic_hot4_qwen3_30b.csv --model qwen3-30b-a3b --gpus 16 --slots 144 --cluster 2x-hgx-h200 --eval-steps 64
PF=65536 DC=2048 row "qwen3_30b_a3b_mbolt (measured, 16 GPUs, 144 slots)" --load resources/loads/qwen3_30b_a3b_mbolt.json --model qwen3-30b-a3b --gpus 16 --slots 144 --cluster 2x-hgx-h200 --eval-steps 64
PF=262144 DC=8192 row "power-law (DeepSeek-V3, 64 GPUs, 320 slots)" --load resources/loads/synthetic_powerlaw1.2_dsv3_hidden.npy --model deepseek-v3 --groups 1 --gpus 64 --slots 320 --cluster 16x-hgx-h200 --eval-steps 32
PF=32768 DC=64 row "power-law (DeepSeek-V3, 8 GPUs, 256 slots; decode 8 tokens per GPU)" --load resources/loads/synthetic_powerlaw1.2_dsv3_hidden.npy --model deepseek-v3 --groups 1 --gpus 8 --slots 256 --cluster 1x-hgx-h200 --eval-steps 32
PF=32768 DC=1024 row "dsv2lite_esft (measured, 8 GPUs, 72 slots)" --load resources/loads/dsv2lite_esft.json --model deepseek-v2-lite --gpus 8 --slots 72 --cluster 1x-hgx-h200 --eval-steps 64
PF=32768 DC=128 row "dsv2lite_esft (measured, 8 GPUs, 64 slots; decode 16 tokens per GPU)" --load resources/loads/dsv2lite_esft.json --model deepseek-v2-lite --gpus 8 --slots 64 --cluster 1x-hgx-h200 --eval-steps 64
PF=65536 DC=2048 row "dsv2lite_esft_steps16 (measured steps, 16 GPUs, 80 slots)" --load resources/loads/dsv2lite_esft_steps16.npy --model deepseek-v2-lite --gpus 16 --slots 80 --cluster 2x-hgx-h200
