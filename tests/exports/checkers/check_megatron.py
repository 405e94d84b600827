"""Megatron-Core: megatron_args.sh against megatron/training/arguments.py (shipped in the
megatron-core wheel, a cp312 wheel).

argv: the file sourced by bash, "${MOEPLAN_PARALLEL_ARGS[@]}", plus the model's size arguments
from its config.json (what a training script passes anyway) and WORLD_SIZE = the layout's GPUs.
Parse: parse_args() (Megatron's argparse). Post-parse: validate_args(args) (parallel sizes,
MoE parallel folding, dispatcher checks) and core_transformer_config_from_args(args)
(TransformerConfig.__post_init__). CUDA_DEVICE_MAX_CONNECTIONS=1 is set as Megatron's own
example scripts set it (validate_args asserts it when TP or CP > 1).
One check runs in Megatron's forward pass rather than at parse time and is mirrored here:
MoELayer.forward raises during training when the attention TP group is > 1 without
sequence parallelism (megatron/core/transformer/moe/moe_layer.py).
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import stubs  # noqa: E402

ALWAYS = {"torch": "2.14.0", "triton": "3.5.0", "transformer_engine": "2.9.0", "apex": "0",
          "flash_attn": "0"}
FALLBACK = {k: "0" for k in "wandb tensorboard regex sentencepiece tiktoken transformers "
            "datasets nltk zarr tensorstore wrapt ijson".split()}


def model_args(cfg: dict, seq: int) -> list[str]:
    experts = cfg.get("n_routed_experts") or cfg.get("num_experts")
    ffn = cfg.get("intermediate_size")
    a = ["--num-layers", str(cfg["num_hidden_layers"]), "--hidden-size", str(cfg["hidden_size"]),
         "--num-attention-heads", str(cfg["num_attention_heads"]), "--ffn-hidden-size", str(ffn),
         "--seq-length", str(seq), "--max-position-embeddings", str(seq),
         "--micro-batch-size", "1", "--bf16", "--disable-bias-linear",
         "--moe-ffn-hidden-size", str(cfg.get("moe_intermediate_size", ffn))]
    if cfg.get("num_key_value_heads") and cfg["num_key_value_heads"] != cfg["num_attention_heads"]:
        a += ["--group-query-attention", "--num-query-groups", str(cfg["num_key_value_heads"])]
    if cfg.get("model_type", "").startswith("qwen2"):
        a += ["--add-qkv-bias"]
    assert experts
    return a


def python311_compat():
    """The wheel is built for Python 3.12, Debian 12 ships 3.11. Its source compiles under 3.11
    (every .py file of 0.19.2 was checked); the one 3.12 name it imports on the arguments path is
    typing.override (PEP 698), a decorator that returns its function unchanged, which
    typing_extensions provides for older Pythons. Nothing of Megatron's is replaced."""
    import typing

    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override


def body(case, res):
    python311_compat()
    finders = stubs.install(ALWAYS, FALLBACK, {"torch.npu"}, stubs.CUDA_H200)
    sys.path.insert(0, case["src"])
    exported = common.bash_array(case["script"], "MOEPLAN_PARALLEL_ARGS")
    cfg = json.loads((Path(case["model_dir"]) / "config.json").read_text())
    argv = exported + model_args(cfg, 4096)
    res.note("exported: " + " ".join(exported))
    os.environ["WORLD_SIZE"] = str(case["world"])
    os.environ["RANK"] = "0"
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    import warnings

    from megatron.training.arguments import (core_transformer_config_from_args, parse_args,
                                             validate_args)

    sys.argv = ["pretrain_gpt.py"] + argv
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = parse_args()
        validate_args(args)
        tc = core_transformer_config_from_args(args)
    names = {a.lstrip("-") for a in exported if a.startswith("--")}
    names |= {n.replace("-", "_") for n in names}
    for w in caught:  # only deprecations naming an exported flag (Python's own are not ours)
        msg = str(w.message)
        if "deprecat" in msg.lower() and any(n in msg for n in names):
            res.error(f"Megatron deprecation warning: {msg}")
    res.note(f"validated: world {args.world_size} tp {args.tensor_model_parallel_size} "
             f"ep {args.expert_model_parallel_size} etp {args.expert_tensor_parallel_size} "
             f"dp {args.data_parallel_size} sp {tc.sequence_parallel} "
             f"dispatcher {tc.moe_token_dispatcher_type}")
    if args.tensor_model_parallel_size > 1 and tc.num_moe_experts and not tc.sequence_parallel:
        res.error("MoE with tensor parallelism > 1 and no --sequence-parallel: "
                  "MoELayer.forward raises during training (moe_layer.py)")
    for key, want in case.get("expect", {}).get("args", {}).items():
        if getattr(args, key, None) != want:
            res.error(f"args.{key} = {getattr(args, key, None)!r}, the layout needs {want!r}")
    res.faked = stubs.faked(finders)


if __name__ == "__main__":
    common.run_checker(body)
