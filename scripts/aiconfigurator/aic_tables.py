"""Reading aiconfigurator-core's measured kernel tables (Parquet + collection_meta.yaml).

Shared by import_aiconfigurator.py (tables -> moeplan cost DB) and fit_calibration.py
(tables -> calibrated roofline parameters). Layout of the package data:

    aiconfigurator_core/systems/<system>.yaml                  device figures, default NCCL version
    aiconfigurator_core/systems/query_versions.yaml            "current" version per framework
    aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/*.parquet
    aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/collection_meta.yaml

Every problem with the input raises BadInput with one line that names the thing and what was
expected; the command-line tools print it and exit 2.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from dataclasses import dataclass, field

PACKAGE = "aiconfigurator-core"
KNOWN_PACKAGE_VERSION = "0.12.0"

# moeplan device names (resources/devices/*.json) for aiconfigurator's system names: b200_sxm is
# an HGX B200 (resources/devices/b200_sxm.json); moeplan's b200.json is the GB200 NVL72 GPU.
SYSTEM_DEVICE = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200_sxm", "gb200": "b200"}

# The GPU name aiconfigurator's collectors write into the `device` column, per system. A row with
# another name was measured on other silicon and copied into this system's directory.
SYSTEM_GPU_NAMES = {
    "h100_sxm": ("NVIDIA H100 80GB HBM3", "NVIDIA H100"),
    "h200_sxm": ("NVIDIA H200",),
    "b200_sxm": ("NVIDIA B200",),
    "gb200": ("NVIDIA GB200",),
}


class BadInput(Exception):
    """One line naming the thing that is wrong and what was expected."""


# ---------------------------------------------------------------------------------------------
# Versions

_VERSION_PART = re.compile(r"(\d+)|([A-Za-z]+)")


def version_key(v: str):
    """Sort key for "1.3.0rc20", "0.5.6.post2", "2.26.2", "0.1.dev19262" (PEP 440-like)."""
    main, _, rest = v.partition("rc") if "rc" in v else (v, "", "")
    key = []
    for num, word in _VERSION_PART.findall(main):
        if num:
            key.append((1, int(num), ""))
        elif word in ("post",):
            key.append((2, 0, word))
        elif word == "dev":
            key.append((-2, 0, word))
        else:
            key.append((0, 0, word))
    # a release candidate sorts before the release it leads to
    key.append((-1, int(re.sub(r"\D.*", "", rest) or 0), "rc") if rest else (0, 0, "final"))
    return tuple(key)


# ---------------------------------------------------------------------------------------------
# Minimal YAML (PyYAML when present; the subset these files use otherwise)


def _scalar(s: str):
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    if s in ("null", "~", ""):
        return None
    if s in ("true", "false"):
        return s == "true"
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    return s


def _flow_map(s: str):
    out = {}
    for part in s.strip()[1:-1].split(","):
        if ":" in part:
            k, v = part.split(":", 1)
            out[k.strip()] = _scalar(v)
    return out


def _mini_yaml(text: str):
    root: dict = {}
    stack = [(-1, root)]
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        value = value.strip()
        if value == "":
            parent[key] = {}
            stack.append((indent, parent[key]))
        elif value.startswith("{"):
            parent[key] = _flow_map(value)
        else:
            parent[key] = _scalar(value)
    return root


def read_yaml(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({e.strerror}); expected a YAML file") from None
    try:
        import yaml  # type: ignore

        data = yaml.safe_load(text)
    except ImportError:
        data = _mini_yaml(text)
    except Exception as e:  # yaml.YAMLError
        raise BadInput(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a YAML mapping")
    return data


# ---------------------------------------------------------------------------------------------
# Locating the data


@dataclass
class DataRoot:
    systems_dir: str  # .../aiconfigurator_core/systems
    package_version: str  # "0.12.0", or "fixture" for a directory given by --data-dir

    def data_dir(self, system: str) -> str:
        return os.path.join(self.systems_dir, "data", system)

    def systems(self) -> list[str]:
        d = os.path.join(self.systems_dir, "data")
        return sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)))

    def versions(self, system: str, op: str, framework: str) -> list[str]:
        d = os.path.join(self.data_dir(system), op, framework)
        if not os.path.isdir(d):
            return []
        return sorted((x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))), key=version_key)

    def frameworks(self, system: str, op: str) -> list[str]:
        d = os.path.join(self.data_dir(system), op)
        if not os.path.isdir(d):
            return []
        return sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)))

    def system_yaml(self, system: str) -> dict:
        p = os.path.join(self.systems_dir, system + ".yaml")
        return read_yaml(p) if os.path.exists(p) else {}

    def current_version(self, system: str, framework: str) -> str | None:
        p = os.path.join(self.systems_dir, "query_versions.yaml")
        if not os.path.exists(p):
            return None
        q = read_yaml(p)
        slot = (q.get("overrides") or {}).get(system, {}).get(framework) or (
            q.get("defaults") or {}
        ).get(framework)
        return (slot or {}).get("current") if isinstance(slot, dict) else None


def find_data_root(data_dir: str | None = None) -> DataRoot:
    """The installed package's systems/ directory, or `data_dir` (a copy of that layout)."""
    if data_dir:
        systems = data_dir
        if os.path.isdir(os.path.join(data_dir, "systems", "data")):
            systems = os.path.join(data_dir, "systems")
        if not os.path.isdir(os.path.join(systems, "data")):
            raise BadInput(
                f"{data_dir}: no systems/data directory; expected a copy of "
                f"aiconfigurator_core/systems (with data/<system>/<op>/<framework>/<version>/)"
            )
        label = "fixture"
        vf = os.path.join(systems, "PACKAGE_VERSION")
        if os.path.exists(vf):
            with open(vf, encoding="utf-8") as f:
                label = f.read().strip() or label
        return DataRoot(systems, label)
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        raise BadInput(
            f"Python package '{PACKAGE}' not installed; expected `pip install "
            f"{PACKAGE}=={KNOWN_PACKAGE_VERSION} pyarrow` (or --data-dir DIR)"
        )
    pkg_dir = list(spec.submodule_search_locations)[0]
    systems = os.path.join(pkg_dir, "systems")
    if not os.path.isdir(os.path.join(systems, "data")):
        raise BadInput(f"{systems}: no data directory; expected {PACKAGE}'s measured tables")
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return DataRoot(systems, version)


# ---------------------------------------------------------------------------------------------
# Tables


@dataclass
class Table:
    path: str  # absolute
    rel: str  # relative to systems/data, e.g. h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet
    system: str
    op: str
    framework: str
    version: str  # directory version
    name: str  # moe_perf
    meta: dict = field(default_factory=dict)  # collection_meta.yaml (may be empty)
    rows: list = field(default_factory=list)

    @property
    def provenance(self) -> str:
        return str(self.meta.get("provenance") or ("collected" if self.meta else "unknown"))

    @property
    def table_meta(self) -> dict:
        return ((self.meta.get("tables") or {}).get(self.name)) or {}

    @property
    def status(self) -> str:
        return str(self.table_meta.get("status") or "unknown")

    @property
    def collected_at(self) -> str:
        return str(self.table_meta.get("collected_at") or self.meta.get("collected_at") or "")


def _require_pyarrow():
    try:
        import pyarrow.parquet as pq  # type: ignore
    except ImportError:
        raise BadInput(
            "Python package 'pyarrow' not installed; expected `pip install pyarrow` "
            "to read aiconfigurator's Parquet tables"
        ) from None
    return pq


def read_table(root: DataRoot, system: str, op: str, framework: str, version: str, name: str,
               required: dict[str, type], optional: tuple[str, ...] = ()) -> Table:
    """Reads <system>/<op>/<framework>/<version>/<name>.parquet, checking `required` columns;
    `optional` string columns are read when present ("" otherwise)."""
    d = os.path.join(root.data_dir(system), op, framework, version)
    path = os.path.join(d, name + ".parquet")
    rel = os.path.relpath(path, os.path.join(root.systems_dir, "data"))
    if not os.path.exists(path):
        raise BadInput(f"{path}: table not found; expected {name}.parquet in {d}")
    meta_path = os.path.join(d, "collection_meta.yaml")
    meta = read_yaml(meta_path) if os.path.exists(meta_path) else {}
    pq = _require_pyarrow()
    try:
        t = pq.read_table(path)
    except Exception as e:  # pyarrow.lib.ArrowInvalid, OSError, ...
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BadInput(f"{path}: corrupt Parquet ({msg}); expected a Parquet table") from None
    cols = set(t.column_names)
    missing = [c for c in required if c not in cols]
    if missing:
        raise BadInput(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(required)}"
        )
    extra = [c for c in optional if c in cols and c not in required]
    rows = t.select(list(required) + extra).to_pylist()
    for r in rows:
        for c in optional:
            if r.get(c) is None:
                r[c] = ""
            elif not isinstance(r[c], str):
                r[c] = str(r[c])
    for i, r in enumerate(rows):
        for c, ty in required.items():
            v = r[c]
            ok = isinstance(v, ty) and not isinstance(v, bool)
            if ty is float and isinstance(v, int) and not isinstance(v, bool):
                ok = True
            if not ok:
                raise BadInput(f"{path}: row {i} column '{c}' = {v!r}; expected {ty.__name__}")
            if ty in (int, float) and not (v >= 0):
                raise BadInput(f"{path}: row {i} column '{c}' = {v!r}; expected a value >= 0")
    return Table(path, rel, system, op, framework, version, name, meta, rows)


def pick_version(root: DataRoot, system: str, op: str, framework: str, wanted: str,
                 table: str) -> str | None:
    """`wanted` if it has `table`, else the newest older version that has it (backward fill,
    never forward, as aiconfigurator serves ops a version lacks); None if there is none."""
    have = [v for v in root.versions(system, op, framework)
            if os.path.exists(os.path.join(root.data_dir(system), op, framework, v, table + ".parquet"))]
    older = [v for v in have if version_key(v) <= version_key(wanted)]
    return older[-1] if older else None


# Schemas (the columns moeplan uses) of the tables it imports.
# The attention core's tables (one layer, one GPU, the heads that GPU runs; latency in ms):
# context rows time b prompts of isl tokens; generation rows one decode step of b sequences
# whose new token attends to isl + step keys (isl = 1, step = the cached length).
ATTENTION_CONTEXT_COLUMNS = {
    "framework": str, "version": str, "device": str, "batch_size": int, "isl": int,
    "num_heads": int, "num_key_value_heads": int, "head_dim": int, "attn_dtype": str,
    "kv_cache_dtype": str, "latency": float,
}
ATTENTION_GENERATION_COLUMNS = {
    "framework": str, "version": str, "device": str, "batch_size": int, "isl": int, "step": int,
    "num_heads": int, "num_key_value_heads": int, "head_dim": int, "kv_cache_dtype": str,
    "latency": float,
}
ATTENTION_OPTIONAL = ("window_size", "kernel_source", "attn_dtype")
# DeepSeek MLA's core: context non-absorbed (per head q·k 192, v 128), generation absorbed over
# the 576-wide latent (V its first 512) with the rope/latent-cache kernel.
MLA_CONTEXT_COLUMNS = {
    "framework": str, "version": str, "device": str, "mla_dtype": str, "kv_cache_dtype": str,
    "num_heads": int, "batch_size": int, "isl": int, "latency": float,
}
MLA_GENERATION_COLUMNS = {
    "framework": str, "version": str, "device": str, "kv_cache_dtype": str, "num_heads": int,
    "batch_size": int, "isl": int, "step": int, "latency": float,
}
MLA_CONTEXT_OPTIONAL = ("kernel_source", "step")
MLA_GENERATION_OPTIONAL = ("kernel_source", "mla_dtype")

MOE_COLUMNS = {
    "framework": str, "version": str, "device": str, "kernel_source": str, "moe_dtype": str,
    "num_tokens": int, "hidden_size": int, "inter_size": int, "topk": int, "num_experts": int,
    "moe_tp_size": int, "moe_ep_size": int, "distribution": str, "latency": float,
}
GEMM_COLUMNS = {
    "framework": str, "version": str, "device": str, "kernel_source": str, "gemm_dtype": str,
    "m": int, "n": int, "k": int, "latency": float,
}
NCCL_OPTIONAL = ("framework", "version", "device")  # absent from the legacy 2.23 tables
NCCL_COLUMNS = {
    "kernel_source": str, "op_name": str, "nccl_dtype": str, "num_gpus": int,
    "message_size": int, "latency": float,
}
CUSTOM_AR_COLUMNS = {
    "framework": str, "version": str, "device": str, "kernel_source": str,
    "allreduce_dtype": str, "num_gpus": int, "message_size": int, "latency": float,
}
MOE_A2A_COLUMNS = {
    "framework": str, "version": str, "device": str, "kernel_source": str, "comm_backend": str,
    "phase": str, "comm_dtype": str, "ep_size": int, "node_num": int, "hidden_size": int,
    "topk": int, "num_experts": int, "num_tokens": int, "sms": int, "latency": float,
}
DEEPEP_NORMAL_COLUMNS = {
    "framework": str, "version": str, "device": str, "kernel_source": str, "node_num": int,
    "hidden_size": int, "num_token": int, "num_topk": int, "num_experts": int,
    "dispatch_sms": int, "dispatch_transmit_us": float, "combine_sms": int,
    "combine_transmit_us": float,
}
DEEPEP_LL_COLUMNS = {
    "framework": str, "version": str, "device": str, "kernel_source": str, "node_num": int,
    "hidden_size": int, "num_token": int, "num_topk": int, "num_experts": int,
    "dispatch_avg_t_us": float, "combine_avg_t_us": float,
}
