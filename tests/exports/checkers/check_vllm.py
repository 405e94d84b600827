"""vLLM: vllm_serve.sh against vLLM's own `vllm serve` parser and engine configuration.

argv: the script run by bash with `vllm` replaced by a recording shim. A multi-node script
(it reads NODE_RANK) is run as node 0 and as its last node, each with its own arguments.
Parse: the `serve` subparser built as vllm/entrypoints/cli/serve.py builds it
(subparsers.add_parser("serve") + entrypoints.common.cli_args.make_arg_parser), then
validate_parsed_serve_args. Post-parse: AsyncEngineArgs.from_cli_args(args)
.create_engine_config(headless=...) as serve.py calls it (headless on the nodes that pass
--headless, with run_headless's own checks): ModelConfig (the model's config.json),
ParallelConfig (EP, DP, nodes, all2all backend, EPLB), with torch emulating 8 H200 per node.
vLLM's model-class inspection normally runs in a child process (to keep CUDA out of the
parent); here it runs in this process, where the fakes are installed. Logged deprecations are
errors.
"""
import glob
import logging
import os
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import stubs  # noqa: E402

ALWAYS = {"torch": "2.14.0", "triton": "3.5.0", "flashinfer": "0.7.3", "cuda": "13.0",
          "pynvml": "13.0", "numba": "0.65.0", "tilelang": "0.1.12", "deep_gemm": "0",
          "deep_ep": "0", "flash_attn": "0", "torchvision": "0.29.0", "torchaudio": "2.11.0",
          "xgrammar": "0.2.8", "triton_kernels": "0", "quack": "0.6.5", "cutlass": "4.8.0",
          "vllm.third_party.pynvml": "12"}
FALLBACK = {k: "0" for k in (
    "setproctitle orjson uvloop aiohttp partial_json_parser tiktoken einops PIL "
    "prometheus_client compressed_tensors IPython scipy ninja watchfiles anthropic "
    "mistral_common gguf llguidance sentencepiece blake3 cbor2 ijson cpuinfo openai_harmony "
    "lm_format_enforcer outlines_core lark depyf python_json_logger opencv cv2 mcp opentelemetry "
    "model_hosting_container_standards oss_harmony prometheus_fastapi_instrumentator "
    "fastsafetensors instanttensor nvtx tokenspeed_mla humming_kernels").split()}
ABSENT = {"torch.npu", "torch.hpu", "torch.musa", "torch.mlu"}


def body(case, res):
    always = dict(ALWAYS)
    # vLLM's compiled extensions (the wheel's .so files) are faked too.
    for whl in glob.glob(os.path.join(case["wheels"], "vllm-*.whl")):
        for name in zipfile.ZipFile(whl).namelist():
            if name.endswith(".so"):
                always[name.split(".")[0].replace("/", ".")] = "0"
    finders = stubs.install(always, FALLBACK, ABSENT, stubs.CUDA_H200)
    sys.path.insert(0, case["src"])
    text = open(case["script"]).read()
    nodes = re.search(r"NODE_RANK to the index of this node, 0\.\.(\d+)", text)
    node_ranks = [0, int(nodes.group(1))] if nodes else [0]

    collector = common.WarningCollector()
    logging.getLogger().addHandler(collector)
    logging.getLogger("vllm").addHandler(collector)
    import vllm
    import vllm.model_executor.models.registry as registry
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    registry._run_in_subprocess = lambda fn: fn()
    parser = FlexibleArgumentParser(prog="vllm")
    sub = parser.add_subparsers(dest="subparser")
    make_arg_parser(sub.add_parser("serve"))
    for node in node_ranks:
        env = {"MODEL_PATH": case["model_dir"], "NODE_RANK": str(node),
               "DP_ADDRESS": "10.0.0.1", "MASTER_ADDR": "10.0.0.1"}
        argv = common.capture_command(case["script"], "vllm", env, res)
        res.note(f"node {node} argv: vllm " + " ".join(argv))
        args = parser.parse_args(argv)
        validate_parsed_serve_args(args)
        if getattr(args, "model_tag", None):
            args.model = args.model_tag
        engine_args = vllm.AsyncEngineArgs.from_cli_args(args)
        config = engine_args.create_engine_config(headless=bool(args.headless))
        pc = config.parallel_config
        if args.headless:  # serve.py run_headless
            if engine_args.data_parallel_hybrid_lb:
                res.error(f"node {node}: data_parallel_hybrid_lb is not applicable headless")
            if pc.data_parallel_size_local <= 0:
                res.error(f"node {node}: data_parallel_size_local must be > 0 headless")
        elif node > 0:
            res.error(f"node {node} would start a second API server (no --headless)")
        res.note(f"node {node} parallel: tp {pc.tensor_parallel_size} dp {pc.data_parallel_size}"
                 f" local {pc.data_parallel_size_local} rank {pc.data_parallel_rank} "
                 f"nnodes {pc.nnodes} ep {pc.enable_expert_parallel} "
                 f"all2all {pc.all2all_backend} "
                 f"eplb {pc.enable_eplb} {pc.eplb_config if pc.enable_eplb else ''}")
        for key, want in case.get("expect", {}).get("parallel", {}).items():
            got = getattr(pc, key, None)
            if key == "num_redundant_experts":
                got = pc.eplb_config.num_redundant_experts
            if got != want:
                res.error(f"node {node}: ParallelConfig.{key} = {got!r}, the layout needs "
                          f"{want!r}")
    for d in collector.deprecations():
        res.error(f"vLLM deprecation warning: {d.strip()}")
    res.faked = stubs.faked(finders)


if __name__ == "__main__":
    common.run_checker(body)
