"""TensorRT-LLM: trtllm_extra_llm_api_options.yaml (and moe_load_balancer.yaml) against the
argument declarations recorded from TensorRT-LLM's source in ../trtllm_llm_args.json (its wheels
are not on PyPI). Checks: YAML as yaml.safe_load reads it; every key declared (StrictBaseModel
forbids others) with its declared type; moe_config.load_balancer as TorchLlmArgs
.validate_load_balancer resolves it: a str path is opened as given, relative to the working
directory of trtllm-serve, which is not the options file's folder (the check runs from a fresh
temporary directory); the balancer config itself: num_slots divisible by the EP size, one
assignment list of num_slots experts per MoE hidden layer.
"""
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "trtllm_llm_args.json"


def type_ok(value, decl: dict) -> bool:
    t = decl["type"]
    if value is None:
        return t.startswith("Optional")
    if t.endswith("int]") or t == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "bool":
        return isinstance(value, bool)
    if t == "Literal":
        return value in decl["values"]
    return True


def check_keys(obj: dict, decls: dict, where: str, res):
    for key, value in obj.items():
        if key not in decls:
            res.error(f"{where}{key}: not a declared field (StrictBaseModel rejects it)")
        elif not type_ok(value, decls[key]):
            res.error(f"{where}{key}: {value!r} is not {decls[key]['type']}")


def body(case, res):
    import yaml

    fx = json.loads(FIXTURE.read_text())
    res.note(f"declarations from {fx['source']['repository']} {fx['source']['path']} "
             f"@ {fx['source']['commit'][:12]}")
    options = Path(case["file"]).resolve()
    data = yaml.safe_load(options.read_text()) or {}
    check_keys(data, fx["top_level"], "", res)
    moe = data.get("moe_config") or {}
    check_keys(moe, fx["MoeConfig"], "moe_config.", res)
    tp, ep = data.get("tensor_parallel_size", 1), data.get("moe_expert_parallel_size")
    mtp = data.get("moe_tensor_parallel_size")
    if ep and mtp and ep * mtp != tp:
        res.error(f"moe_expert_parallel_size {ep} x moe_tensor_parallel_size {mtp} != "
                  f"tensor_parallel_size {tp}")
    lb = moe.get("load_balancer")
    if lb is None:
        return
    if isinstance(lb, str):
        with tempfile.TemporaryDirectory() as cwd:  # trtllm-serve started elsewhere
            old = os.getcwd()
            os.chdir(cwd)
            try:
                if not os.path.exists(lb):
                    res.error(f"moe_config.load_balancer: {lb!r} is opened relative to the "
                              "working directory of trtllm-serve (llm_args.py "
                              "validate_load_balancer), not to the options file: "
                              "FileNotFoundError when started from any other directory")
                    near = options.parent / lb
                    if near.exists():
                        lb = yaml.safe_load(near.read_text())
                    elif case.get("goldens"):
                        res.note(f"{lb}: not among the golden files, its content not checked")
                        return
                    else:
                        return
                else:
                    lb = yaml.safe_load(Path(lb).read_text())
            finally:
                os.chdir(old)
    if not isinstance(lb, dict):
        res.error(f"moe_config.load_balancer: {type(lb).__name__} is neither a path nor a mapping")
        return
    check_keys(lb, fx["MoeLoadBalancerConfig"], "load_balancer.", res)
    slots = lb.get("num_slots")
    if slots is None or (ep and slots % ep):
        res.error(f"load_balancer.num_slots {slots} must be set and divisible by EP size {ep}")
    layers = case.get("moe_layers")
    assign = lb.get("initial_global_assignments") or {}
    if layers is not None and sorted(int(k) for k in assign) != layers:
        res.error("initial_global_assignments must be keyed by the MoE hidden layers "
                  f"{layers[0]}..{layers[-1]}")
    for k, v in assign.items():
        if slots is not None and len(v) != slots:
            res.error(f"initial_global_assignments[{k}]: {len(v)} entries, num_slots {slots}")
            break


if __name__ == "__main__":
    common.run_checker(body)
