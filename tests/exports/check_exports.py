#!/usr/bin/env python3
"""Check moeplan's exports against the frameworks' own argument parsers.

    python3 tests/exports/check_exports.py --moeplan build/bin/moeplan [--slim]
        [--frameworks sglang,vllm,trtllm,megatron,paddle] [--cache DIR] [--allow-missing]
    python3 tests/exports/check_exports.py --goldens tests/cli/golden   # the committed goldens

Each framework release is downloaded once from PyPI without its dependencies
(`pip download --no-deps`) into the cache, unpacked, and given a small virtual environment of
its light, pinned dependencies (tests/exports/requirements/*.txt). Its argument parser is then
built from its own source with the heavy imports (torch, triton, CUDA libraries, paddle) faked
(checkers/stubs.py) and every exported command or file is parsed, including the post-parse
checks that run without a GPU (checkers/check_*.py). TensorRT-LLM is not on PyPI: its YAML is
checked against declarations recorded from its source (trtllm_llm_args.json).

A download that fails (no network, registry down) fails the run; --allow-missing (or
MOEPLAN_EXPORTS_ALLOW_MISSING=1) turns it into a SKIPPED line instead, never silently.
The last line is "N passed, M failed"; the exit status is 1 when any check failed.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CHECKERS = HERE / "checkers"


@dataclass
class Release:
    framework: str          # sglang, vllm, megatron, paddle
    package: str            # PyPI name
    version: str            # also moeplan's --framework-version for it
    python: tuple           # minimum (major, minor)
    requirements: str       # tests/exports/requirements/<name>.txt
    pip_extra: tuple = ()   # extra `pip download` options
    slim: bool = True       # part of the slim (CI) form

    @property
    def key(self) -> str:
        return f"{self.package}-{self.version}"


# Each release is exported for with `moeplan export --framework-version VERSION` and checked by
# its own parser; the first release of a framework is moeplan's default for it.
RELEASES = [
    Release("sglang", "sglang", "0.5.23", (3, 11), "sglang"),
    # the last release before --attn-dp-size: moeplan writes --enable-dp-attention --dp-size
    Release("sglang", "sglang", "0.5.21", (3, 11), "sglang", slim=False),
    Release("vllm", "vllm", "0.34.0", (3, 11), "vllm"),
    # megatron/training/arguments.py ships in the wheel; the wheel is tagged cp312, its source
    # runs under 3.11 (checkers/check_megatron.py: python311_compat).
    Release("megatron", "megatron-core", "0.19.2", (3, 11), "megatron",
            ("--python-version", "3.12", "--only-binary=:all:")),
    Release("paddle", "paddlenlp", "3.0.0b4", (3, 11), "paddle"),
    # 2.8.1 has no expert_parallel_degree: moeplan refuses EP layouts for it, the others must
    # parse.
    Release("paddle", "paddlenlp", "2.8.1", (3, 11), "paddle"),
]
# TensorRT-LLM is not on PyPI: both of moeplan's versions are checked against the declarations
# recorded from its source (trtllm_llm_args.json); "1.3" writes the balancer as a file named by
# its absolute path.
TRTLLM_VERSIONS = ["main@0004396720", "1.3"]

MODELS = {"qwen2-57b-a14b": "qwen2", "deepseek-v3": "dsv3"}


class Missing(Exception):
    pass


# --------------------------------------------------------------------------- environment


def find_python(minimum: tuple) -> str:
    cands = [sys.executable, shutil.which(f"python{minimum[0]}.{minimum[1]}") or "",
             *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))]
    for p in cands:
        if not p:
            continue
        try:
            out = subprocess.run([p, "-c", "import sys; print(*sys.version_info[:2])"],
                                 capture_output=True, text=True, check=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            continue
        if tuple(map(int, out)) >= minimum:
            return p
    raise Missing(f"no Python >= {minimum[0]}.{minimum[1]} found (needed for this release)")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def ensure_release(rel: Release, cache: Path, log) -> tuple[str, str]:
    """Download, unpack and give an environment to one release; (python, source dir)."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pattern = f"{rel.package.replace('-', '_')}-{rel.version}-*.whl"
    found = glob.glob(str(wheels / pattern))
    if not found:
        t = time.time()
        r = run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d",
                 str(wheels), *rel.pip_extra, f"{rel.package}=={rel.version}"])
        found = glob.glob(str(wheels / pattern))
        if r.returncode or not found:
            raise Missing(f"pip download {rel.package}=={rel.version} failed: "
                          f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        log(f"downloaded {Path(found[0]).name} in {time.time() - t:.1f} s")
    src = cache / "src" / rel.key
    if not (src / ".complete").exists():
        with zipfile.ZipFile(found[0]) as z:
            names = [n for n in z.namelist()
                     if not n.endswith((".so", ".cubin", ".fatbin")) and ".so." not in n]
            z.extractall(src, names)
        (src / ".complete").write_text("")
    venv = cache / f"venv-{rel.requirements}"
    py = venv / "bin" / "python"
    req = HERE / "requirements" / f"{rel.requirements}.txt"
    stamp = venv / ".requirements"
    if not (stamp.exists() and stamp.read_text() == req.read_text()):
        t = time.time()
        base = find_python(rel.python)
        shutil.rmtree(venv, ignore_errors=True)
        r = run([base, "-m", "venv", str(venv)])
        if r.returncode:
            raise Missing(f"python -m venv failed: {r.stderr.strip()}")
        r = run([str(py), "-m", "pip", "install", "--quiet", "-r", str(req)])
        if r.returncode:
            raise Missing(f"pip install -r {req.name} failed: "
                          f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        stamp.write_text(req.read_text())
        log(f"environment {venv.name} in {time.time() - t:.1f} s")
    return str(py), str(src)


def model_dir(work: Path, model: str) -> str:
    d = work / "models" / model
    d.mkdir(parents=True, exist_ok=True)  # checks run in threads: same content either way
    if not (d / "config.json").exists():
        shutil.copy(ROOT / "resources" / "models" / f"{model}.json", d / "config.json")
    return str(d)


def moe_layers(model: str) -> list[int]:
    cfg = json.loads((ROOT / "resources" / "models" / f"{model}.json").read_text())
    first = cfg.get("first_k_dense_replace", 0)
    return list(range(first, cfg["num_hidden_layers"]))


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    name: str               # what was exported, for the report
    framework: str          # sglang vllm trtllm megatron paddle
    model: str
    world: int
    version: str = ""       # the release it was exported for and is checked by
    data: dict = field(default_factory=dict)   # checker-specific: script/file, expect ...


def cases_for_export(name: str, fmt: str, out: Path, model: str, layout: dict | None,
                     version: str, goldens: bool = False,
                     files: dict | None = None) -> list[Case]:
    """The checks of one export (a folder from `moeplan export --out`, or golden files)."""
    files = files or {}
    world = layout["num_gpus"] if layout else 0
    dp = layout.get("dp_size", 1) if layout else 1
    ep, tp = (layout["ep_size"], layout["tp_size"]) if layout else (None, None)
    common = {"goldens": goldens}
    if fmt == "sglang":
        # releases before 0.5.22 count attention-DP groups with dp_size (no attn_dp_size)
        attn = {"attn_dp_size": ep if ep and ep > 1 else 1} if version != "0.5.21" else \
            {"dp_size": ep if ep and ep > 1 else 1, "enable_dp_attention": bool(ep and ep > 1)}
        exp = {"resolved": {"tp_size": ep * tp, "ep_size": ep, **attn}} if layout else {}
        return [Case(name, "sglang", model, world, version, dict(
            common, script=str(files.get("script", out / "sglang_launch.sh")), expect=exp))]
    if fmt == "vllm":
        exp = {"parallel": {"tensor_parallel_size": tp, "data_parallel_size": ep}} \
            if layout and ep > 1 else {}
        return [Case(name, "vllm", model, world, version, dict(
            common, script=str(files.get("script", out / "vllm_serve.sh")), expect=exp))]
    if fmt == "trtllm":
        return [Case(name, "trtllm", model, world, version, dict(
            common, file=str(files.get("file", out / "trtllm_extra_llm_api_options.yaml")),
            moe_layers=moe_layers(model)))]
    if fmt == "megatron":
        exp = {"args": {"expert_model_parallel_size": ep, "tensor_model_parallel_size": tp,
                        "expert_tensor_parallel_size": tp}} if layout else {}
        return [Case(name, "megatron", model, world, version, dict(
            common, script=str(files.get("script", out / "megatron_args.sh")), expect=exp))]
    if fmt == "paddle":
        exp = {"args": {"expert_parallel_degree": ep, "tensor_parallel_degree": tp,
                        "sharding_parallel_degree": dp * ep, "data_parallel_degree": 1}} \
            if layout and ep > 1 else {}
        return [Case(name, "paddle", model, world, version, dict(
            common, file=str(files.get("file", out / "paddle_args.json")), expect=exp))]
    raise ValueError(fmt)


def default_versions() -> dict[str, str]:
    """moeplan's default --framework-version of each format: its first release here."""
    out = {"trtllm": TRTLLM_VERSIONS[0]}
    for rel in RELEASES:
        out.setdefault(rel.framework, rel.version)
    return out


def golden_cases(golden: Path) -> list[Case]:
    """The committed goldens of tests/cli (test_cli_export.cpp says how each was made)."""
    qwen = {"num_gpus": 16, "ep_size": 16, "tp_size": 1}
    qwen_8x2 = {"num_gpus": 16, "ep_size": 8, "tp_size": 2}
    dsv3 = {"num_gpus": 128, "ep_size": 128, "tp_size": 1}
    g = golden
    spec = [
        ("qwen2 sglang (rank 1)", "sglang", "qwen2-57b-a14b", qwen,
         {"script": g / "export_qwen2_sglang.txt"}),
        ("dsv3 sglang 128x1 + placement", "sglang", "deepseek-v3", dsv3,
         {"script": g / "export_dsv3_sglang_launch.sh"}),
        ("qwen2 vllm (rank 1)", "vllm", "qwen2-57b-a14b", qwen,
         {"script": g / "export_qwen2_vllm.txt"}),
        ("dsv3 vllm 128x1 + placement", "vllm", "deepseek-v3", dsv3,
         {"script": g / "export_dsv3_vllm.txt"}),
        ("qwen2 trtllm --layout 6", "trtllm", "qwen2-57b-a14b", qwen_8x2,
         {"file": g / "export_qwen2_trtllm.txt"}),
        ("dsv3 trtllm 128x1 + placement", "trtllm", "deepseek-v3", dsv3,
         {"file": g / "export_dsv3_trtllm_options.yaml"}),
        ("qwen2 megatron 8x2", "megatron", "qwen2-57b-a14b", qwen_8x2,
         {"script": g / "export_qwen2_megatron.txt"}),
        ("qwen2 paddle --layout 2", "paddle", "qwen2-57b-a14b", qwen,
         {"file": g / "export_qwen2_paddle.txt"}),
    ]
    out = []
    defaults = default_versions()
    for name, fmt, model, layout, files in spec:
        out += cases_for_export(name, fmt, Path("."), model, layout, defaults[fmt], True, files)
    return out


def check_refusal(mp, base: list[str], fmt: str, version: str, stderr: str,
                  label: str) -> tuple[bool, str]:
    """A layout the framework cannot run: moeplan's one-line error must say why and name the
    nearest layout of the plan that it can run (`--layout N`), which must then export."""
    import re

    msg = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if "no layout of the plan can be expressed" in msg:
        return True, msg
    m = re.search(r"nearest expressible layout in the plan: (rank \d+: [^()]*)\(--layout (\d+)"
                  r"(, without the --placement)?", msg)
    if not m:
        return False, f"the error names no runnable layout: {msg}"
    args = list(base)
    for flag in ("--layout",) + (("--placement",) if m.group(3) else ()):
        if flag in args:
            i = args.index(flag)
            del args[i:i + 2]
    r = mp(*args, "--layout", m.group(2), "--format", fmt, "--framework-version", version)
    if r.returncode:
        return False, f"--layout {m.group(2)} named as runnable fails too: {r.stderr.strip()}"
    return True, f"refused, names {m.group(1).strip()} (--layout {m.group(2)}, exports)"


def moeplan_cases(moeplan: str, work: Path, slim: bool, formats: list[str],
                  versions: dict[str, list[str]], log) -> tuple[list[Case], list]:
    """Export a matrix of plans with moeplan for every release in `versions` and return the
    checks of every file written, and the refusals as (label, ok, message)."""
    def mp(*args):
        r = run([moeplan, *args])
        return r

    plans = work / "plans"
    plans.mkdir(parents=True, exist_ok=True)
    jobs = []  # (plan file, model, layout arg, placement, label)
    steps = [("qwen2", "qwen2-57b-a14b", "2x-hgx-h200", []),
             ("qwen2-decode", "qwen2-57b-a14b", "2x-hgx-h200", ["--phase", "decode"]),
             # A context: SGLang --context-length/--mem-fraction-static, vLLM --max-model-len
             # and --gpu-memory-utilization.
             ("qwen2-decode-kv", "qwen2-57b-a14b", "2x-hgx-h200",
              ["--phase", "decode", "--isl", "4096", "--osl", "1024", "--mem-fraction", "0.85"]),
             ("dsv3", "deepseek-v3", "16x-hgx-h200", []),
             # DeepSeek's published decode deployment: EP144 on 18 nodes, 256 + 32 slots.
             ("dsv3-ep144", "deepseek-v3", "128x-hgx-h200",
              ["--gpus", "144", "--phase", "decode", "--dispatcher", "a2av", "--load",
               "powerlaw:alpha=1.2,shuffle=1,layers=1", "--placement", "eplb", "--redundant",
               "total:32"]),
             # The DeepEP dispatchers with two-batch overlap (ep16×tp1 on two nodes).
             ("qwen2-deepep", "qwen2-57b-a14b", "2x-hgx-h200",
              ["--dispatcher", "deepep_normal", "--tbo", "on"]),
             ("qwen2-deepep-ll", "qwen2-57b-a14b", "2x-hgx-h200",
              ["--phase", "decode", "--dispatcher", "deepep_ll", "--tbo", "on"]),
             # What-if weight formats on the bf16 checkpoint: online quantization flags where
             # the framework has them (vLLM fp8_per_block, SGLang fp8 per tensor, Megatron-Core
             # recipes), refusals where it has none.
             ("qwen2-fp8-block", "qwen2-57b-a14b", "2x-hgx-h200", ["--weights", "fp8-block"]),
             ("qwen2-fp8-tensor", "qwen2-57b-a14b", "2x-hgx-h200", ["--weights", "fp8-tensor"])]
    for label, model, cluster, extra in steps:
        p = plans / f"{label}.json"
        r = mp("plan", "--model", model, "--cluster", cluster, *extra, "--json", "-o", str(p))
        if r.returncode:
            raise RuntimeError(f"moeplan plan {label}: {r.stderr.strip()}")
    place = plans / "dsv3-place.json"
    r = mp("place", "--synthetic", "powerlaw:alpha=1.2", "--model", "deepseek-v3", "--gpus",
           "128", "--nodes", "16", "--slots", "384", "--policy", "eplb", "--out", str(place))
    if r.returncode:
        raise RuntimeError(f"moeplan place: {r.stderr.strip()}")
    place144 = plans / "dsv3-ep144-place.json"
    r = mp("place", "--synthetic", "powerlaw:alpha=1.2,shuffle=1", "--model", "deepseek-v3",
           "--gpus", "144", "--nodes", "18", "--slots", "288", "--policy", "eplb", "--out",
           str(place144))
    if r.returncode:
        raise RuntimeError(f"moeplan place (EP144): {r.stderr.strip()}")

    qwen_layouts = ["", "8x2", "4x4"]
    if not slim:
        n = len(json.loads((plans / "qwen2.json").read_text()).get("layouts", [])) or 12
        qwen_layouts += [str(k) for k in range(1, n + 1)]
    for lay in dict.fromkeys(qwen_layouts):
        jobs.append((plans / "qwen2.json", "qwen2-57b-a14b", lay, None, f"qwen2 {lay or 'rec'}"))
    jobs.append((plans / "qwen2-decode.json", "qwen2-57b-a14b", "", None, "qwen2 decode rec"))
    jobs.append((plans / "qwen2-decode-kv.json", "qwen2-57b-a14b", "", None,
                 "qwen2 decode context rec"))
    jobs.append((plans / "qwen2-deepep.json", "qwen2-57b-a14b", "", None,
                 "qwen2 deepep_normal tbo"))
    jobs.append((plans / "qwen2-deepep-ll.json", "qwen2-57b-a14b", "", None,
                 "qwen2 decode deepep_ll tbo"))
    jobs.append((plans / "qwen2-fp8-block.json", "qwen2-57b-a14b", "", None,
                 "qwen2 --weights fp8-block rec"))
    jobs.append((plans / "qwen2-fp8-tensor.json", "qwen2-57b-a14b", "", None,
                 "qwen2 --weights fp8-tensor rec"))
    jobs.append((plans / "dsv3.json", "deepseek-v3", "128x1", place, "dsv3 128x1 +eplb384"))
    jobs.append((plans / "dsv3-ep144.json", "deepseek-v3", "144x1", place144,
                 "dsv3 decode 144x1 +eplb288"))
    if not slim:
        jobs.append((plans / "dsv3.json", "deepseek-v3", "", None, "dsv3 rec"))

    cases = []
    refusals = []
    for i, (plan, model, lay, placement, label) in enumerate(jobs):
        base = ["export", "--plan", str(plan)] + (["--layout", lay] if lay else []) + \
            (["--placement", str(placement)] if placement else [])
        jdir = work / "exports" / f"{i}-json"
        r = mp(*base, "--format", "json", "--out", str(jdir))
        if r.returncode:
            log(f"  {label}: moeplan json export failed: {r.stderr.strip()}")
            continue
        layout = json.loads((jdir / "moeplan_layout.json").read_text())["layout"]
        shape = f"dp{layout['dp_size']}xep{layout['ep_size']}xtp{layout['tp_size']}"
        for fmt in formats:
            for version in versions.get(fmt, []):
                out = work / "exports" / f"{i}-{fmt}-{version.replace('@', '-')}"
                r = mp(*base, "--format", fmt, "--framework-version", version, "--out", str(out))
                what = f"{label} ({shape}) {fmt} {version}"
                if r.returncode == 2:  # the framework cannot run this layout: moeplan says so
                    ok, msg = check_refusal(mp, base, fmt, version, r.stderr, what)
                    refusals.append((what, ok, msg))
                    continue
                if r.returncode:
                    raise RuntimeError(f"moeplan export {what}: rc {r.returncode} "
                                       f"{r.stderr.strip()}")
                cases += cases_for_export(f"{label} ({shape})", fmt, out, model, layout, version)
    return cases, refusals


# --------------------------------------------------------------------------- running


def run_case(case: Case, env: dict, work: Path) -> tuple[Case, str, dict, float]:
    """One check in its release's environment; returns (case, release, result, seconds)."""
    t = time.time()
    fw = case.framework
    if fw == "trtllm":
        py = env.get("trtllm_python", sys.executable)
        data = dict(case.data)
        rel = f"TensorRT-LLM {case.version} (recorded declarations)"
        return case, rel, invoke(py, "check_trtllm.py", data, work), time.time() - t
    py, src, version = env[(fw, case.version)]
    data = dict(case.data, src=src, version=version, world=case.world,
                model_dir=model_dir(work, case.model), wheels=str(env["cache"] / "wheels"))
    return case, f"{fw} {version}", invoke(py, f"check_{fw}.py", data, work), time.time() - t


def invoke(py: str, checker: str, data: dict, work: Path) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=work, delete=False) as f:
        json.dump(data, f)
    r = run([py, str(CHECKERS / checker), f.name], timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"ok": False, "errors": [f"checker crashed (rc {r.returncode}): "
                                    f"{r.stderr.strip()[-1500:]}"], "notes": [], "faked": []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--moeplan", help="the moeplan binary: export a matrix of plans")
    src.add_argument("--goldens", help="check the committed golden exports in this folder")
    ap.add_argument("--frameworks", default="sglang,vllm,trtllm,megatron,paddle")
    ap.add_argument("--slim", action="store_true",
                    help="fewer layouts (CI budget): recommended, 8x2, 4x4, decode, dsv3 128x1")
    ap.add_argument("--cache", default=os.environ.get(
        "MOEPLAN_EXPORTS_CACHE", os.path.expanduser("~/.cache/moeplan-exports")))
    ap.add_argument("--allow-missing", action="store_true",
                    default=os.environ.get("MOEPLAN_EXPORTS_ALLOW_MISSING") == "1",
                    help="a framework that cannot be downloaded or installed is SKIPPED "
                         "(reported) instead of failing the run")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()

    t0 = time.time()
    log = lambda m: print(m, flush=True)  # noqa: E731
    formats = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    cache = Path(args.cache)
    env: dict = {"cache": cache}
    failed = passed = 0
    skipped: list[str] = []
    versions: dict[str, list[str]] = {"trtllm": TRTLLM_VERSIONS[:1] if args.slim
                                      else list(TRTLLM_VERSIONS)}
    for rel in RELEASES:
        if rel.framework not in formats or (args.slim and not rel.slim):
            continue
        try:
            py, src = ensure_release(rel, cache, log)
        except Missing as e:
            if not args.allow_missing:
                log(f"FAIL setup {rel.key}: {e}\n(no network or registry? pass --allow-missing "
                    "or MOEPLAN_EXPORTS_ALLOW_MISSING=1 to skip it explicitly)")
                failed += 1
                continue
            skipped.append(rel.key)
            log(f"SKIPPED {rel.key}: {e}")
            continue
        env[(rel.framework, rel.version)] = (py, src, rel.version)
        versions.setdefault(rel.framework, []).append(rel.version)
        if rel.framework == "sglang":
            env["trtllm_python"] = py  # any environment with PyYAML
    t_setup = time.time() - t0
    log(f"setup: {t_setup:.1f} s")

    with tempfile.TemporaryDirectory(prefix="moeplan-exports-") as tmp:
        work = Path(tmp)
        refusals = []
        if args.goldens:
            cases = [c for c in golden_cases(Path(args.goldens)) if c.framework in formats]
        else:
            cases, refusals = moeplan_cases(args.moeplan, work, args.slim, formats, versions,
                                            log)
        for what, ok, msg in refusals:
            log(f"{'PASS' if ok else 'FAIL'} moeplan refuses: {what}: {msg}")
            passed, failed = passed + ok, failed + (not ok)
        # each exported file is checked by the release it was exported for
        runs = [c for c in cases if c.framework == "trtllm" or (c.framework, c.version) in env]
        log(f"{len(runs)} parser checks of {len(cases)} exported files, "
            f"{len(refusals)} refusals checked")
        t1 = time.time()

        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for case, rel, res, secs in pool.map(lambda c: run_case(c, env, work), runs):
                if res["ok"]:
                    passed += 1
                    log(f"PASS {rel}: {case.name} ({secs:.1f} s)")
                else:
                    failed += 1
                    log(f"FAIL {rel}: {case.name} ({secs:.1f} s)")
                    for err in res["errors"]:
                        log("    " + err.replace("\n", "\n    "))
                if args.verbose:
                    for n in res["notes"]:
                        log("    note: " + n)
                    if res.get("faked"):
                        log("    faked: " + " ".join(res["faked"]))
        log(f"checks: {time.time() - t1:.1f} s, total {time.time() - t0:.1f} s")
    if skipped:
        log(f"skipped (--allow-missing): {' '.join(skipped)}")
    print(f"{passed} passed, {failed} failed" + (f", {len(skipped)} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
