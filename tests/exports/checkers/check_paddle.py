"""PaddleNLP: paddle_args.json against paddlenlp.trainer.TrainingArguments.

The exported file holds the parallel degrees only; the harness adds `output_dir` (required by
TrainingArguments) and parses the merged file with PdArgumentParser(TrainingArguments)
.parse_json_file, as PaddleNLP's run scripts do. Post-parse: TrainingArguments.__post_init__
runs as in a `paddle.distributed.launch` process of a job of `world` GPUs
(paddle.distributed.get_world_size() = world, PADDLE_RANK_IN_NODE=0): the hybrid-parallel
degree checks, among them the expert_parallel_degree / sharding / data_parallel rules.
paddle is faked; paddlenlp's package __init__ files are skipped (they import every model and
the server), paddlenlp.data is imported first as paddlenlp/__init__.py does.
"""
import json
import os
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import stubs  # noqa: E402

FALLBACK = {k: "0" for k in "ijson scipy PIL aistudio_sdk paddlenlp_ops paddlefsl visualdl "
            "paddle2onnx onnx datasets fast_dataindex tool_helpers blobfile tiktoken".split()}


def body(case, res):
    world = int(case["world"])
    os.environ["PADDLE_RANK_IN_NODE"] = "0"
    os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    finders = stubs.install({"paddle": "3.0.0"}, FALLBACK, set(), {
        "paddle.distributed.get_world_size": lambda *a: world,
        "paddle.distributed.get_rank": lambda *a: 0,
        "paddle.nn.Layer": stubs.Module, "paddle.nn.layer.layers.Layer": stubs.Module})
    src = case["src"]
    sys.path.insert(0, src)
    for pkg in ("paddlenlp", "paddlenlp.trainer"):
        m = types.ModuleType(pkg)
        m.__version__ = case["version"]
        m.__path__ = [os.path.join(src, *pkg.split("."))]
        sys.modules[pkg] = m
    import paddlenlp.data  # noqa: F401 - first, as paddlenlp/__init__.py imports it
    from paddlenlp.trainer.argparser import PdArgumentParser
    from paddlenlp.trainer.training_args import TrainingArguments

    exported = json.loads(Path(case["file"]).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        merged = dict(exported, output_dir=os.path.join(tmp, "out"))
        cfg = Path(tmp) / "args.json"
        cfg.write_text(json.dumps(merged))
        (args,) = PdArgumentParser(TrainingArguments).parse_json_file(str(cfg))
    res.note(f"{case['version']}: tp {args.tensor_parallel_degree} "
             f"ep {getattr(args, 'expert_parallel_degree', None)} "
             f"sharding {args.sharding_parallel_degree} {args.sharding} "
             f"dp {args.data_parallel_degree}")
    for key, want in case.get("expect", {}).get("args", {}).items():
        got = getattr(args, key, None)
        if got != want:
            res.error(f"TrainingArguments.{key} = {got!r}, the layout needs {want!r}")
    res.faked = stubs.faked(finders)


if __name__ == "__main__":
    common.run_checker(body)
