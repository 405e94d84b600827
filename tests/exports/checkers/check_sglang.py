"""SGLang: sglang_launch.sh and sglang_expert_location.json against sglang's own ServerArgs.

argv: the launch script run by bash with `python3` replaced by a recording shim.
Parse: sglang.srt.server_args.prepare_server_args (its argparse, deprecation actions included;
a logged deprecation is an error). Post-parse: ServerArgs.resolve_once() (the full resolution
pipeline, with torch emulating 8 H200 per node) and ServerArgs.check_server_args().
Expert location: the JSON's keys must bind to ExpertLocationMetadata.init_by_mapping's
signature (compute_initial_expert_location_metadata passes **data_dict), and its shape and
values must match what _init_common asserts (E + ep_num_redundant_experts slots per layer,
divisible by ep_size).
"""
import inspect
import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import stubs  # noqa: E402

ALWAYS = {"torch": "2.14.1", "triton": "3.5.0", "sgl_kernel": "0.4.10", "sglang_kernel": "0.4.10",
          "flashinfer": "0.7.2", "cuda": "13.0", "pynvml": "13.0", "numba": "0.65.1",
          "tilelang": "0.1.12", "deep_gemm": "0", "deep_ep": "0", "flash_attn": "0",
          "torchvision": "0", "torchaudio": "2.11.0", "xgrammar": "0.2.7", "triton_kernels": "0",
          "quack": "0.6.5", "cutlass": "4.8.0"}
# Service-side packages that argument handling imports but never consults; faked only where
# they are not installed.
FALLBACK = {k: "0" for k in (
    "zmq setproctitle orjson pybase64 uvloop aiohttp fastapi uvicorn openai partial_json_parser "
    "tiktoken einops PIL prometheus_client compressed_tensors modelscope IPython interegular "
    "xxhash zstandard scipy distro ninja watchfiles anthropic mistral_common gguf timm dateutil "
    "multipart starlette outlines llguidance msgpack cloudpickle sentencepiece tqdm blake3 "
    "cachetools cbor2 ijson tvm_ffi soundfile decord openai_harmony smg_grpc_servicer "
    "grpc google torch_memory_saver nvtx humming_kernels").split()}
ABSENT = {"torch.npu", "torch.hpu", "torch.musa", "torch.mlu"}


def body(case, res):
    finders = stubs.install(ALWAYS, FALLBACK, ABSENT, stubs.CUDA_H200)
    sys.path.insert(0, case["src"])
    script = case["script"]
    argv = common.capture_command(script, "python3", {
        "MODEL_PATH": case["model_dir"], "NODE_RANK": "0",
        "DIST_INIT_ADDR": "127.0.0.1:29500"}, res)
    if argv[:2] != ["-m", "sglang.launch_server"]:
        res.error(f"the script does not run `python3 -m sglang.launch_server`: {argv[:2]}")
        return
    argv = argv[2:]
    res.note("argv: " + " ".join(argv))

    import sglang.srt.server_args as sa  # noqa: E402 - after the fakes

    collector = common.WarningCollector()
    logging.getLogger().addHandler(collector)
    args = sa.prepare_server_args(argv)
    logging.getLogger().addHandler(collector)  # prepare_server_args reconfigures logging
    for d in collector.deprecations():
        res.error(f"sglang deprecation warning at parse time: {d.strip()}")
    args.resolve_once()
    args.check_server_args()
    for d in collector.deprecations()[len(res.errors):]:
        res.error(f"sglang deprecation warning at resolution: {d.strip()}")
    view = sa.resolving_view(args) if hasattr(sa, "resolving_view") else args
    res.note(f"resolved: tp {view.tp_size} ep {view.ep_size} dp {view.dp_size} "
             f"attn_dp {getattr(view, 'attn_dp_size', '?')} "
             f"a2a {getattr(view, 'moe_a2a_backend', '?')}")
    exp = case.get("expect", {})
    for key, want in exp.get("resolved", {}).items():
        got = getattr(view, key, None)
        if got != want:
            res.error(f"resolved {key} = {got!r}, the layout needs {want!r}")

    loc = getattr(args, "init_expert_location", "trivial")
    if loc and loc != "trivial":
        check_expert_location(case, args, loc, res)
    res.faked = stubs.faked(finders)


def check_expert_location(case, args, loc, res):
    from sglang.srt.eplb.expert_location import ExpertLocationMetadata

    if not os.path.exists(loc):
        if case.get("goldens"):
            res.note(f"{loc}: not among the golden files, not checked")
            return
        res.error(f"--init-expert-location {loc}: no such file")
        return
    data = json.loads(Path(loc).read_text())
    sig = inspect.signature(ExpertLocationMetadata.init_by_mapping)
    try:
        sig.bind(None, **data, moe_ep_rank=0)
    except TypeError as e:
        res.error(f"{Path(loc).name}: keys {sorted(data)} do not fit init_by_mapping: {e}")
        return
    cfg = json.loads((Path(case["model_dir"]) / "config.json").read_text())
    experts = cfg.get("n_routed_experts") or cfg.get("num_experts")
    layers = cfg["num_hidden_layers"]
    redundant = args.ep_num_redundant_experts
    m = data["physical_to_logical_map"]
    slots = experts + redundant
    if len(m) != layers:
        res.error(f"physical_to_logical_map has {len(m)} rows, the model {layers} hidden layers")
    if any(len(r) != slots for r in m):
        res.error(f"physical_to_logical_map rows must hold E + ep_num_redundant_experts = {slots}")
    if slots % args.ep_size:
        res.error(f"{slots} physical experts not divisible by ep_size {args.ep_size}")
    for i, r in enumerate(m):
        if sorted(set(r)) != list(range(experts)):
            res.error(f"row {i}: every logical expert 0..{experts - 1} must have a slot")
            break


if __name__ == "__main__":
    common.run_checker(body)
