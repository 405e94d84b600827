#!/usr/bin/env python3
"""Ask NVIDIA aiconfigurator (``aiconfigurator-core``) for its own latency estimates.

The point is to put aiconfigurator's numbers side by side with moeplan's.  The
script only calls the SDK; it does not model anything itself (the only values
it derives are labelled ``derived_*`` and are plain arithmetic on SDK outputs).

Usage (run with the interpreter of the virtualenv that has aiconfigurator-core,
e.g. /root/.cache/moeplan/gpu-tables-venv/bin/python)::

    aic_estimate.py --model Qwen/Qwen3-30B-A3B --system h200_sxm --backend trtllm \\
        [--version current] --tp 1 --attention-dp 8 --moe-tp 1 --ep 8 \\
        --batch 64 --isl 1024 --osl 256 [--prefill-batch 1 8] [--per-op]

It prints one JSON object on stdout.  SDK log warnings go to stderr and are
also copied into the JSON under ``sdk_warnings``.  Errors (unknown model,
unknown system, system without that backend, invalid parallel layout, missing
perf data) print one ``aic_estimate: error: ...`` line on stderr and exit 2.

Meaning of the numbers (all latencies in milliseconds)
------------------------------------------------------
* ``batch`` / ``--prefill-batch`` are the SDK's ``RuntimeConfig.batch_size``
  (the ``bs`` column).  It is **per attention-DP rank**: the SDK's
  ``global_bs = bs * attention_dp``.  With ``tp=1`` a rank is one GPU, so it
  is per GPU; with ``tp>1`` one batch is shared by the ``tp`` GPUs of the rank.
  All attention-DP ranks are assumed equally loaded; MoE ops see the tokens of
  all DP ranks (the SDK scales the MoE token count by ``attention_dp_size``).
* ``prefill[*].prefill_ms``: TTFT of a static batch of ``B`` prompts of
  ``isl`` tokens on each DP rank = ``BaseBackend.run_static(mode="static_ctx")``
  ``ttft`` column (context latency; no queueing).
* ``decode.decode_step_ms``: TPOT = ``run_static(mode="static_gen")``
  ``tpot`` column = generation latency of the ``osl - 1`` decode steps of a
  static batch ``B`` (context lengths ``isl+1 .. isl+osl-1``, evaluated every
  ``--stride`` steps and interpolated by the engine) divided by ``osl - 1``.
* ``decode.decode_step_mid_ms``: one decode step at context length
  ``isl + osl//2 + 1`` (``rust_engine_step.estimate_decode_step_latency_with_rust``,
  i.e. ``AicEngine.decode_step_latency``) -- a cross-check of the TPOT.
* ``decode.sdk_tokens_per_s_per_gpu`` / ``sdk_tokens_per_s_per_user``: the SDK's
  ``tokens/s/gpu`` and ``tokens/s/user`` columns of the static_gen run
  (decode only: ``global_bs*(osl-1)/generation_latency`` divided by
  ``tp*pp*attention_dp``; per user ``1000/tpot``).
* ``static_batch``: the SDK's plain ``run_static(mode="static")`` of batch ``B``
  (prefill of the whole batch, then decode): ttft, tpot, tokens/s/gpu,
  tokens/s/user as the SDK reports them.
* ``agg_sweep`` (``--agg-sweep TTFT_MS TPOT_MS``): the best row of the SDK's
  aggregated in-flight-batching sweep of this split,
  ``BaseBackend.find_best_agg_result_under_constraints`` (batches up to 512 per DP
  rank, context tokens per step in strides of 512), ranked by ``seq/s`` as the SDK
  ranks it: ``bs``, ``ctx_tokens``, ``ttft`` (one request's prefill times the
  backend's ``_ttft_queuing_factor``), ``tpot``, ``tokens/s/gpu``, ``tokens/s/user``,
  ``request_rate``; null when nothing meets the targets.
* ``memory_gib`` / ``oom``: the SDK's per-GPU memory estimate for that run and
  its OOM verdict against the system's GPU memory.
* ``--per-op``: the SDK's per-op latency dicts (``InferenceSummary``
  ``get_context_latency_dict`` / ``get_generation_latency_dict`` and the
  matching ``*_source_dict``: ``silicon`` = measured table, ``empirical`` =
  fitted/analytic, ``mixed``).  Decode per-op values are divided by
  ``osl - 1`` so they sum to ``decode_step_ms``.  ``by_category`` groups op
  names into attention / moe / communication / other by name (this grouping
  is ours; e.g. DeepSeek's decode ``generation_moe_overlap`` op contains the
  overlapped MoE dispatch as well and is counted as moe).

SDK functions used
------------------
``aiconfigurator_core.sdk.perf_database``: ``get_supported_databases``,
``get_version_slots``, ``resolve_query_version``, ``get_database``;
``aiconfigurator_core.sdk.config``: ``ModelConfig``, ``RuntimeConfig``;
``aiconfigurator_core.sdk.models``: ``get_model``, ``check_is_moe`` and, as the
SDK estimate path does before ``get_model``, ``helpers.resolve_nvfp4_for_system``
and ``helpers.resolve_context_fmha_by_data``;
``aiconfigurator_core.sdk.backends.factory.get_backend(...).run_static`` (which
compiles the model into the Rust ``AicEngine`` and runs
``run_static_per_op``); ``aiconfigurator_core.sdk.rust_engine_step``:
``estimate_decode_step_latency_with_rust``.

Quantization is left at the SDK's defaults for the checkpoint (inferred from
its HF config); when the checkpoint implies fp8 FMHA but the perf tables have
no fp8 context-attention slice, the SDK's own guard downgrades prefill FMHA to
bf16 and logs a warning (see ``sdk_warnings``).

Only models bundled with the package (``aiconfigurator_core/model_configs``)
or a local directory holding a ``config.json`` are accepted, so the script
never reaches out to Hugging Face.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

PROG = "aic_estimate"


class _SdkError(Exception):
    """An error worth one clear line on stderr."""


class _WarningCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # pragma: no cover - defensive
            msg = str(record.msg)
        if msg not in self.messages:
            self.messages.append(msg)


def _parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Print aiconfigurator's prefill (TTFT) and decode (TPOT) estimates as JSON.",
    )
    p.add_argument("--model", required=True, help="HF id of a bundled model config (e.g. Qwen/Qwen3-30B-A3B)")
    p.add_argument("--system", default="h200_sxm", help="system name under aiconfigurator_core/systems")
    p.add_argument(
        "--backend",
        default="trtllm",
        choices=["trtllm", "sglang", "vllm", "auto"],
        help="framework whose kernel tables are used; auto = trtllm, else sglang, else vllm",
    )
    p.add_argument(
        "--version",
        default="current",
        help="backend version: slot alias current/previous/next or a literal slot version (default current)",
    )
    p.add_argument("--tp", type=int, default=1, help="attention tensor-parallel size")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    p.add_argument("--attention-dp", type=int, default=1, help="attention data-parallel size")
    p.add_argument("--moe-tp", type=int, default=None, help="MoE tensor-parallel size")
    p.add_argument("--ep", type=int, default=None, help="MoE expert-parallel size")
    p.add_argument("--batch", type=int, required=True, help="decode batch per attention-DP rank")
    p.add_argument(
        "--prefill-batch",
        type=int,
        nargs="+",
        default=None,
        help="prefill batch(es) per attention-DP rank (default: --batch)",
    )
    p.add_argument("--isl", type=int, required=True, help="input sequence length (tokens)")
    p.add_argument("--osl", type=int, required=True, help="output sequence length (tokens, >= 2)")
    p.add_argument("--stride", type=int, default=32, help="decode-step sampling stride of run_static (SDK default 32)")
    p.add_argument("--per-op", action="store_true", help="include the SDK per-op breakdown")
    p.add_argument(
        "--agg-sweep",
        nargs=2,
        type=float,
        metavar=("TTFT_MS", "TPOT_MS"),
        default=None,
        help="also run the SDK's aggregated (in-flight batching) sweep of this parallel split "
        "under these targets (find_best_agg_result_under_constraints) and report its best row",
    )
    p.add_argument("--no-static-batch", action="store_true", help="skip the plain mode='static' run")
    p.add_argument("--systems-path", default=None, help="alternative systems directory (default: bundled)")
    p.add_argument("--quiet", action="store_true", help="do not echo SDK warnings to stderr")
    args = p.parse_args(argv)
    for name in ("tp", "pp", "attention_dp", "batch", "isl", "stride"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.osl < 2:
        p.error("--osl must be >= 2 (TPOT needs at least one decode step)")
    for name in ("moe_tp", "ep"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.agg_sweep is not None and not all(v > 0 for v in args.agg_sweep):
        p.error("--agg-sweep targets must be > 0 ms")
    if args.prefill_batch is None:
        args.prefill_batch = [args.batch]
    if any(b < 1 for b in args.prefill_batch):
        p.error("--prefill-batch values must be >= 1")
    return args


def _check_model(model: str) -> None:
    from aiconfigurator_core.sdk import common

    if os.path.isdir(model):
        if not os.path.isfile(os.path.join(model, "config.json")):
            raise _SdkError(f"local model directory {model!r} has no config.json")
        return
    if model not in common.DefaultHFModels:
        bundled = ", ".join(sorted(common.DefaultHFModels))
        raise _SdkError(
            f"unknown model {model!r}: not bundled with aiconfigurator-core (this script never downloads "
            f"configs). Bundled models: {bundled}"
        )


def _resolve_backend_and_version(system: str, backend: str, version: str, systems_path: str | None):
    from aiconfigurator_core.sdk import perf_database

    supported = perf_database.get_supported_databases(systems_path)
    if system not in supported:
        raise _SdkError(f"unknown system {system!r}; systems with perf data: {', '.join(sorted(supported))}")
    available = {b: list(v) for b, v in supported[system].items() if v}
    if backend == "auto":
        for cand in ("trtllm", "sglang", "vllm"):
            if cand in available:
                backend = cand
                break
        else:
            raise _SdkError(f"system {system!r} has no perf data for any backend")
    if backend not in available:
        raise _SdkError(
            f"system {system!r} has no perf data for backend {backend!r}; available backends: "
            f"{', '.join(sorted(available)) or 'none'}"
        )
    slots = perf_database.get_version_slots(system, backend, systems_paths=systems_path)
    try:
        literal = perf_database.resolve_query_version(system, backend, version, systems_paths=systems_path)
    except ValueError as exc:
        raise _SdkError(f"backend version {version!r} not usable for {backend} on {system}: {exc}") from None
    return backend, literal, slots, available[backend]


def _category(op_name: str) -> str:
    n = op_name.lower()
    for prefix in ("context_", "generation_"):
        if n.startswith(prefix):
            n = n[len(prefix) :]
            break
    comm_markers = ("dispatch", "allreduce", "all_reduce", "allgather", "all_gather", "alltoall", "all_to_all",
                    "a2a", "reduce_scatter", "p2p", "combine", "_comm")
    if any(m in n for m in comm_markers) or n.endswith("_ar") or "_ar_" in n:
        return "communication"
    if any(m in n for m in ("moe", "expert", "router", "shared")):
        return "moe"
    if any(m in n for m in ("attention", "attn", "mla", "dsa", "msa", "bmm", "qkv", "proj", "fmha")):
        return "attention"
    return "other"


def _per_op(latency: dict, source: dict, divisor: float = 1.0) -> dict:
    ops = {name: {"ms": val / divisor, "source": source.get(name)} for name, val in latency.items()}
    cats: dict[str, float] = {}
    for name, val in latency.items():
        c = _category(name)
        cats[c] = cats.get(c, 0.0) + val / divisor
    return {"ops": ops, "by_category_ms": cats, "total_ms": sum(latency.values()) / divisor}


def _row(summary) -> dict:
    df = summary.get_summary_df()
    row = df.iloc[0].to_dict()
    out = {}
    for k, v in row.items():
        if hasattr(v, "item"):
            v = v.item()
        out[k] = v
    return out


def _mem(summary) -> tuple[dict, bool]:
    mem = {k: float(v) for k, v in (summary.get_memory() or {}).items()}
    return mem, bool(summary.check_oom())


def run(args: argparse.Namespace) -> dict:
    collector = _WarningCollector()
    sdk_logger = logging.getLogger("aiconfigurator_core")
    sdk_logger.addHandler(collector)
    if args.quiet:
        sdk_logger.propagate = False
    elif not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format=f"{PROG}: sdk %(levelname)s: %(message)s")

    if args.systems_path:
        from aiconfigurator_core.sdk import perf_database

        perf_database.set_systems_paths(args.systems_path)

    _check_model(args.model)
    backend, version, slots, declared_versions = _resolve_backend_and_version(
        args.system, args.backend, args.version, args.systems_path
    )

    from aiconfigurator_core.sdk import perf_database
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import ModelConfig, RuntimeConfig
    from aiconfigurator_core.sdk.errors import PerfDataNotAvailableError
    from aiconfigurator_core.sdk.models import check_is_moe, get_model
    from aiconfigurator_core.sdk.models.helpers import (
        resolve_context_fmha_by_data,
        resolve_nvfp4_for_system,
    )
    from aiconfigurator_core.sdk.rust_engine_step import estimate_decode_step_latency_with_rust

    database = perf_database.get_database(args.system, backend, version, systems_paths=args.systems_path)
    if database is None:
        raise _SdkError(f"could not load the perf database for {args.system}/{backend}/{version}")

    is_moe = check_is_moe(args.model)
    moe_tp, moe_ep = args.moe_tp, args.ep
    if not is_moe:
        moe_tp = moe_tp or 1
        moe_ep = moe_ep or 1
    model_config = ModelConfig(
        tp_size=args.tp,
        pp_size=args.pp,
        attention_dp_size=args.attention_dp,
        moe_tp_size=moe_tp,
        moe_ep_size=moe_ep,
        system=args.system,
        num_gpus_per_node=int(database.system_spec["node"]["num_gpus_per_node"]),
    )
    # Same pre-get_model resolution as the SDK's estimate path (quant left at the
    # checkpoint's defaults; these only fix up modes the tables cannot serve).
    resolve_nvfp4_for_system(model_config, args.system, args.model, backend_name=backend)
    resolve_context_fmha_by_data(model_config, args.model, database, backend, is_context_role=True)
    try:
        model = get_model(args.model, model_config, backend)
    except ValueError as exc:
        raise _SdkError(f"invalid configuration for {args.model}: {exc}") from None
    cfg = model.config
    gpus = cfg.tp_size * cfg.pp_size * cfg.attention_dp_size * cfg.cp_size
    be = get_backend(backend)

    def static(batch: int, mode: str):
        rc = RuntimeConfig(batch_size=batch, isl=args.isl, osl=args.osl)
        try:
            return be.run_static(model, database, rc, mode, stride=args.stride)
        except PerfDataNotAvailableError as exc:
            raise _SdkError(f"aiconfigurator has no perf data for this case ({mode}, batch {batch}): {exc}") from None

    result: dict = {
        "sdk": {"package": "aiconfigurator-core", "version": _pkg_version()},
        "inputs": {
            "model": args.model,
            "model_family": getattr(model, "model_family", None),
            "model_class": type(model).__name__,
            "system": args.system,
            "backend": backend,
            "backend_version_requested": args.version,
            "backend_version": database.version,
            "backend_version_slots": slots,
            "backend_versions_declared": declared_versions,
            "parallel": {
                "tp": cfg.tp_size,
                "pp": cfg.pp_size,
                "attention_dp": cfg.attention_dp_size,
                "moe_tp": cfg.moe_tp_size,
                "moe_ep": cfg.moe_ep_size,
                "cp": cfg.cp_size,
                "gpus": gpus,
            },
            "quant": {
                "gemm": cfg.gemm_quant_mode.name,
                "moe": cfg.moe_quant_mode.name if cfg.moe_quant_mode is not None else None,
                "kvcache": cfg.kvcache_quant_mode.name,
                "fmha": cfg.fmha_quant_mode.name,
                "comm": cfg.comm_quant_mode.name,
                "nextn": getattr(model, "_nextn", 0),
            },
            "is_moe": bool(is_moe),
            "isl": args.isl,
            "osl": args.osl,
            "decode_batch_per_dp_rank": args.batch,
            "prefill_batches_per_dp_rank": args.prefill_batch,
            "stride": args.stride,
            "batch_semantics": (
                "batch = SDK RuntimeConfig.batch_size ('bs'), per attention-DP rank; "
                "global concurrency = batch * attention_dp; a rank spans tp GPUs (tp=1: per GPU)"
            ),
        },
    }

    prefill = []
    for b in args.prefill_batch:
        s = static(b, "static_ctx")
        r = _row(s)
        mem, oom = _mem(s)
        entry = {
            "batch_per_dp_rank": b,
            "global_batch": r["global_bs"],
            "prefill_ms": r["ttft"],
            "derived_prefill_tokens_per_s_per_gpu": (
                r["global_bs"] * args.isl / (r["ttft"] / 1000.0) / gpus if r["ttft"] else None
            ),
            "memory_gib": mem,
            "oom": oom,
        }
        if args.per_op:
            entry["per_op"] = _per_op(s.get_context_latency_dict(), s.get_context_source_dict())
        prefill.append(entry)
    result["prefill"] = prefill

    s = static(args.batch, "static_gen")
    r = _row(s)
    mem, oom = _mem(s)
    try:
        mid = estimate_decode_step_latency_with_rust(
            model, database, gen_tokens=args.batch, isl=args.isl, osl=args.osl
        )
    except PerfDataNotAvailableError as exc:
        raise _SdkError(f"aiconfigurator has no perf data for the decode step: {exc}") from None
    decode = {
        "batch_per_dp_rank": args.batch,
        "global_batch": r["global_bs"],
        "decode_step_ms": r["tpot"],
        "decode_step_mid_ms": mid,
        "generation_latency_ms": r["generation_latency"],
        "sdk_tokens_per_s_per_gpu": r["tokens/s/gpu"],
        "sdk_tokens_per_s_per_user": r["tokens/s/user"],
        "memory_gib": mem,
        "oom": oom,
        "kv_cache_oom": bool(s.check_kv_cache_oom()),
    }
    if args.per_op:
        decode["per_op"] = _per_op(s.get_generation_latency_dict(), s.get_generation_source_dict(), args.osl - 1)
    fallbacks = s.get_moe_comm_fallbacks()
    if fallbacks:
        decode["moe_comm_fallbacks"] = [str(f) for f in fallbacks]
    result["decode"] = decode

    if not args.no_static_batch:
        s = static(args.batch, "static")
        r = _row(s)
        mem, oom = _mem(s)
        result["static_batch"] = {
            "batch_per_dp_rank": args.batch,
            "global_batch": r["global_bs"],
            "ttft_ms": r["ttft"],
            "tpot_ms": r["tpot"],
            "request_latency_ms": r["request_latency"],
            "sdk_tokens_per_s_per_gpu": r["tokens/s/gpu"],
            "sdk_tokens_per_s_per_user": r["tokens/s/user"],
            "memory_gib": mem,
            "oom": oom,
        }

    if args.agg_sweep is not None:
        ttft_ms, tpot_ms = args.agg_sweep
        rc = RuntimeConfig(batch_size=1, isl=args.isl, osl=args.osl, ttft=ttft_ms, tpot=tpot_ms)
        try:
            s = be.find_best_agg_result_under_constraints(
                model, database, rc, top_k=1, max_batch_size=512, ctx_stride=512
            )
        except PerfDataNotAvailableError as exc:
            raise _SdkError(f"aiconfigurator has no perf data for the aggregated sweep: {exc}") from None
        df = s.get_summary_df()
        best = None
        if df is not None and len(df) > 0:
            row = df.iloc[0].to_dict()
            keys = ("bs", "global_bs", "concurrency", "request_rate", "ctx_tokens", "ttft", "tpot",
                    "request_latency", "seq/s", "tokens/s/gpu", "tokens/s/user", "num_total_gpus")
            best = {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in keys if k in row}
        result["agg_sweep"] = {
            "ttft_target_ms": ttft_ms,
            "tpot_target_ms": tpot_ms,
            "best": best,
            "semantics": (
                "the SDK's in-flight batching sweep over bs (per DP rank) and ctx_tokens per step; "
                "ttft = per-request prefill x the backend's _ttft_queuing_factor; "
                "tokens/s/gpu over this split's GPUs; best by seq/s"
            ),
        }

    result["sdk_warnings"] = list(collector.messages)
    return result


def _pkg_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("aiconfigurator-core")
    except Exception:
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import aiconfigurator_core  # noqa: F401
    except ImportError:
        print(
            f"{PROG}: error: aiconfigurator_core is not importable by {sys.executable}; run this script with the "
            "python of the virtualenv that has aiconfigurator-core installed",
            file=sys.stderr,
        )
        return 2
    try:
        result = run(args)
    except _SdkError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, NotImplementedError, KeyError) as exc:
        print(f"{PROG}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
