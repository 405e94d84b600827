#!/usr/bin/env python3
"""Import aiconfigurator-core's measured GPU kernel tables into a moeplan cost DB.

    python3 scripts/aiconfigurator/import_aiconfigurator.py --system h200_sxm --framework trtllm \
        [--version current|V] [--nccl-version V] [--deepep-version V] [--device NAME]
        [--data-dir DIR] --out DB

Writes the SQLite schema of planner/costs/cost_db.cpp (moeplan_schema version 2; tables runs,
points)
for one system x framework x version: one `runs` row per source table (its path, collection
metadata and the package version in `command`), and one `points` row per measured key. Every
point's `detail` carries its provenance:

    source=aiconfigurator-core 0.12.0 table=h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet
    framework=TRTLLM version=1.3.0rc20 kernel=moe_torch_flow_cutlass gpu=NVIDIA H200
    collection=collected status=complete value=measured [samples=N] [...]

`value` is `measured` (a row of the table, collected on this system's GPU), `borrowed` (a row
whose device column names another GPU: measured elsewhere and copied into this system's
directory), or `measured-as=<dtype>` (a proxy row: an NCCL fp16 curve also written as bf16,
which moves the same bytes). aiconfigurator-core 0.12.0 ships raw collected rows only (its
load-time grid expansion was removed, perf_interp_design.md section 5.5); what lies beyond a
table's grid is extrapolated at query time, which MeasuredCosts labels `db-extrap`.

Ops written (shape text and m/n/k conventions in docs/GPU_COSTS.md):
    gemm                         gemm_perf            (m, n, k) as the profiler writes them
    moe_fused                    moe_perf             one rank's fused MoE (permute + expert
                                                      GEMMs + activation + unpermute)
    all_gather, all_reduce,      comm/nccl            nccl-tests buffer size S in bytes, one group
    all_to_all, reduce_scatter
    custom_all_reduce            comm/<fw>/custom_allreduce_perf (the framework's own TP AR)
    moe_dispatch, moe_combine    comm/<fw>/moe_a2a_perf, wideep_deepep_{normal,ll}_perf (DeepEP)
    attention                    attention/<fw>/{context,generation}_attention_perf (GQA/MHA),
                                 mla/<fw>/{context,generation}_mla_perf (DeepSeek MLA): the
                                 attention core of one layer on one GPU at the heads it runs,
                                 bf16 with a bf16 KV cache, full attention (no window)

Bad input (package or pyarrow missing, unknown system/framework/version, a missing or corrupt
table) prints one line naming the thing and what was expected, exits 2, and writes nothing: the
DB is built in a temporary file beside --out and renamed over it only when complete.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sqlite3
import sys
import tempfile
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aic_tables as aic  # noqa: E402
from aic_tables import BadInput  # noqa: E402

SCHEMA_VERSION = 2
# Verbatim from planner/costs/cost_db.cpp, migrations 1 and 2 (never edit a migration).
SCHEMA_SQL = """
CREATE TABLE runs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at TEXT NOT NULL, host TEXT, cpu_model TEXT, device TEXT NOT NULL,
  backend TEXT NOT NULL, communicator TEXT, compiler TEXT, cuda TEXT, nccl TEXT, mpi TEXT,
  moeplan_version TEXT, world_size INTEGER NOT NULL, command TEXT);
CREATE TABLE points(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  device TEXT NOT NULL, backend TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL,
  shape TEXT NOT NULL, m REAL NOT NULL, n REAL NOT NULL, k REAL NOT NULL,
  group_size INTEGER NOT NULL, bytes REAL NOT NULL, flops REAL NOT NULL,
  median_s REAL NOT NULL, p10_s REAL NOT NULL, p90_s REAL NOT NULL, repetitions INTEGER NOT NULL,
  bus_bandwidth REAL NOT NULL, disposition TEXT NOT NULL, detail TEXT, measured_at TEXT NOT NULL,
  UNIQUE(device, backend, op, dtype, shape, group_size));
CREATE INDEX points_by_op ON points(op, dtype, group_size, m);

ALTER TABLE points ADD COLUMN provenance TEXT NOT NULL DEFAULT '';
"""
# points.provenance of every imported point: "imported:" + the value kind (measured, borrowed,
# measured-as=fp16); planner/costs/cost_db.hpp kProvenanceImported.
PROVENANCE_PREFIX = "imported:"

FRAMEWORKS = ("trtllm", "sglang", "vllm")
OPS = ("moe_fused", "gemm", "all_gather", "all_reduce", "all_to_all", "reduce_scatter",
       "custom_all_reduce", "moe_dispatch", "moe_combine", "attention")

# aiconfigurator dtype names -> moeplan dtype text (moeplan's own names where it has them).
DTYPE = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8",
         "float32": "fp32", "int8": "int8"}
# Bytes per weight element, for the nominal `bytes` column.
WEIGHT_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "int8": 1.0,
                "int4_wo": 0.5, "w4a16_mxfp4": 0.5, "w4a8_mxfp4_mxfp8": 0.5, "nvfp4": 0.5,
                "w4afp8": 0.5}
ACT_BYTES = {"fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5, "w4a8_mxfp4_mxfp8": 1.0}  # else 2
NCCL_OP = {"all_gather": "all_gather", "all_reduce": "all_reduce", "alltoall": "all_to_all",
           "reduce_scatter": "reduce_scatter"}
NCCL_ELEM_BYTES = {"half": 2, "int8": 1}


def bus_factor(op: str, g: int) -> float:
    """nccl-tests busBw / algBw."""
    return 2.0 * (g - 1) / g if op == "all_reduce" else (g - 1) / g


def moe_dtype_name(d: str) -> str:
    return DTYPE.get(d, d)


def utc_now() -> str:
    """Now, or SOURCE_DATE_EPOCH when set (reproducible output for committed fixtures)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    t = (_dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc) if epoch and epoch.isdigit()
         else _dt.datetime.now(_dt.timezone.utc))
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Writer:
    """Collects runs and points in memory (duplicate keys merged), then writes them."""

    def __init__(self, device: str, source: str, ops=None, dtypes=None):
        self.ops = set(ops) if ops else None
        self.dtypes = set(dtypes) if dtypes else None
        self.device = device
        self.source = source  # "aiconfigurator-core 0.12.0"
        self.runs: list[dict] = []
        self.points: "OrderedDict[tuple, dict]" = OrderedDict()
        self.counts: "OrderedDict[str, int]" = OrderedDict()

    def add_run(self, table: aic.Table, backend: str, communicator: str, world: int,
                command: str, nccl: str = "") -> int:
        meta = table.meta
        info = [f"table={table.rel}", f"collection={table.provenance}", f"status={table.status}"]
        for k in ("collected_at", "collector_ref", "case_plan_hash"):
            v = table.table_meta.get(k)
            if v:
                info.append(f"{k}={v}")
        image = (meta.get("runtime") or {}).get("image")
        if image:
            info.append(f"image={image}")
        self.runs.append(dict(
            started_at=utc_now(), host=self.source, cpu_model="", device=self.device,
            backend=backend, communicator=communicator, compiler="", cuda="", nccl=nccl, mpi="",
            moeplan_version="", world_size=world, command=command + " ; " + " ".join(info)))
        return len(self.runs)

    def wants(self, op: str, dtype: str) -> bool:
        return (self.ops is None or op in self.ops) and (self.dtypes is None or dtype in self.dtypes)

    def add_point(self, run_id: int, table: aic.Table, row_info: str, *, backend: str, op: str,
                  dtype: str, shape: str, m: float, n: float, k: float, group_size: int,
                  bytes_: float, flops: float, seconds: float, bus_bw_factor: float = 0.0,
                  value: str = "measured"):
        if not self.wants(op, dtype):
            return
        key = (self.device, backend, op, dtype, shape, group_size)
        p = self.points.get(key)
        if p is not None:  # a duplicate key in the table: keep every sample, report the median
            p["samples"].append(seconds)
            return
        detail = (f"source={self.source} table={table.rel} {row_info} "
                  f"collection={table.provenance} status={table.status} value={value}")
        self.points[key] = dict(
            run_id=run_id, device=self.device, backend=backend, op=op, dtype=dtype, shape=shape,
            m=float(m), n=float(n), k=float(k), group_size=int(group_size), bytes=float(bytes_),
            flops=float(flops), samples=[seconds], bus_factor=bus_bw_factor, detail=detail,
            measured_at=table.collected_at or "unknown", provenance=PROVENANCE_PREFIX + value)
        self.counts[op] = self.counts.get(op, 0) + 1

    def write(self, out: str):
        out_dir = os.path.dirname(os.path.abspath(out)) or "."
        if not os.path.isdir(out_dir):
            raise BadInput(f"{out}: directory {out_dir} does not exist; expected a writable path")
        if os.path.isdir(out):
            raise BadInput(f"{out}: is a directory; expected a cost database file path")
        fd, tmp = tempfile.mkstemp(prefix=".moeplan-import-", suffix=".db.tmp", dir=out_dir)
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        try:
            db = sqlite3.connect(tmp)
            db.executescript(
                "CREATE TABLE moeplan_schema(version INTEGER NOT NULL);"
                f"INSERT INTO moeplan_schema VALUES({SCHEMA_VERSION});" + SCHEMA_SQL)
            cols = ("started_at", "host", "cpu_model", "device", "backend", "communicator",
                    "compiler", "cuda", "nccl", "mpi", "moeplan_version", "world_size", "command")
            db.executemany(
                f"INSERT INTO runs({','.join(cols)}) VALUES({','.join('?' * len(cols))})",
                [tuple(r[c] for c in cols) for r in self.runs])
            rows = []
            for p in self.points.values():
                s = sorted(p["samples"])
                med = s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])
                detail = p["detail"] + (f" samples={len(s)}" if len(s) > 1 else "")
                bus = p["bytes"] / med * p["bus_factor"] if p["bus_factor"] > 0 and med > 0 else 0.0
                # NOTE: the tables hold one latency per key (the collector's mean over its runs),
                # no spread: p10 = p90 = median; repetitions = the number of table rows merged.
                rows.append((p["run_id"], p["device"], p["backend"], p["op"], p["dtype"],
                             p["shape"], p["m"], p["n"], p["k"], p["group_size"], p["bytes"],
                             p["flops"], med, s[0], s[-1], len(s), bus, "passed", detail,
                             p["measured_at"], p["provenance"]))
            db.executemany(
                "INSERT INTO points(run_id, device, backend, op, dtype, shape, m, n, k, "
                "group_size, bytes, flops, median_s, p10_s, p90_s, repetitions, bus_bandwidth, "
                "disposition, detail, measured_at, provenance) "
                "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows)
            db.commit()
            ok = db.execute("PRAGMA integrity_check").fetchone()[0]
            db.close()
            if ok != "ok":
                raise BadInput(f"{tmp}: integrity check failed ({ok})")
            os.replace(tmp, out)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def gpu_value(system: str, device_col: str) -> str:
    names = aic.SYSTEM_GPU_NAMES.get(system)
    if names is None or not device_col or device_col in names:
        return "measured"
    return "borrowed"


def import_moe(w: Writer, t: aic.Table, command: str, backend: str):
    run = w.add_run(t, backend, "", max(r["moe_tp_size"] * r["moe_ep_size"] for r in t.rows),
                    command)
    for r in t.rows:
        T, H, I, k, E = r["num_tokens"], r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"]
        tp, ep = r["moe_tp_size"], r["moe_ep_size"]
        if tp <= 0 or ep <= 0 or I % tp or E % ep or T <= 0 or not r["latency"] > 0:
            continue  # not a runnable split; never seen in 0.12.0 tables
        width = I // tp
        dt = r["moe_dtype"]
        gated = r["kernel_source"] != "moe_torch_flow_nongated"
        gemms = 3 if gated else 2
        pairs = T * k / ep  # expected (token, expert) pairs on the rank
        active = min(E / ep, pairs)
        flops = 2.0 * gemms * pairs * H * width
        bytes_ = (active * gemms * H * width * WEIGHT_BYTES.get(dt, 2.0)
                  + pairs * (2 * H + gemms * width) * ACT_BYTES.get(dt, 2.0))
        shape = (f"tokens={T},hidden={H},inter={I},topk={k},experts={E},tp={tp},ep={ep},"
                 f"dist={r['distribution']},kernel={r['kernel_source']}")
        info = (f"framework={r['framework']} version={r['version']} kernel={r['kernel_source']} "
                f"gpu='{r['device']}' moe_dtype={dt}")
        if not w.wants("moe_fused", moe_dtype_name(dt)):
            continue
        w.add_point(run, t, info, backend=backend, op="moe_fused", dtype=moe_dtype_name(dt),
                    shape=shape, m=T, n=width, k=H, group_size=tp * ep, bytes_=bytes_,
                    flops=flops, seconds=r["latency"] * 1e-3, value=gpu_value(t.system, r["device"]))


def import_gemm(w: Writer, t: aic.Table, command: str, backend: str):
    run = w.add_run(t, backend, "", 1, command)
    for r in t.rows:
        m, n, k = r["m"], r["n"], r["k"]
        if m <= 0 or n <= 0 or k <= 0 or not r["latency"] > 0:
            continue
        dt = r["gemm_dtype"]
        eb = WEIGHT_BYTES.get(dt, 2.0)
        info = (f"framework={r['framework']} version={r['version']} kernel={r['kernel_source']} "
                f"gpu='{r['device']}' gemm_dtype={dt}")
        if not w.wants("gemm", moe_dtype_name(dt)):
            continue
        w.add_point(run, t, info, backend=backend, op="gemm", dtype=moe_dtype_name(dt),
                    shape=f"m={m},n={n},k={k}", m=m, n=n, k=k, group_size=1,
                    bytes_=(m * k + k * n + m * n) * eb, flops=2.0 * m * n * k,
                    seconds=r["latency"] * 1e-3, value=gpu_value(t.system, r["device"]))


def import_nccl(w: Writer, t: aic.Table, command: str):
    run = w.add_run(t, "nccl", "nccl", max(r["num_gpus"] for r in t.rows), command,
                    nccl=t.version)
    for r in t.rows:
        op = NCCL_OP.get(r["op_name"])
        eb = NCCL_ELEM_BYTES.get(r["nccl_dtype"])
        g = r["num_gpus"]
        if op is None or eb is None or g < 2 or r["message_size"] <= 0 or not r["latency"] > 0:
            continue
        S = r["message_size"] * eb  # nccl-tests size: bytes per rank buffer
        info = (f"kernel={r['kernel_source']} nccl={t.version} nccl_dtype={r['nccl_dtype']} "
                f"elements={r['message_size']} op_name={r['op_name']}")
        if r["version"] and r["version"] != t.version:
            info += f" row_version={r['version']}"
        if r["device"]:
            info += f" gpu='{r['device']}'"
        dtypes = [(moe_dtype_name(r["nccl_dtype"]), gpu_value(t.system, r["device"]))]
        if r["nccl_dtype"] == "half":  # bf16 moves the same bytes; NCCL sums it at the same rate
            dtypes.append(("bf16", "measured-as=fp16"))
        for dt, value in dtypes:
            w.add_point(run, t, info, backend="nccl", op=op, dtype=dt,
                        shape=f"bytes={S},groups=1,ranks={g}", m=S, n=1, k=0, group_size=g,
                        bytes_=S, flops=0.0, seconds=r["latency"] * 1e-3,
                        bus_bw_factor=bus_factor(op, g), value=value)


def import_custom_ar(w: Writer, t: aic.Table, command: str, backend: str):
    run = w.add_run(t, backend, backend, max(r["num_gpus"] for r in t.rows), command)
    for r in t.rows:
        g = r["num_gpus"]
        eb = NCCL_ELEM_BYTES.get(r["allreduce_dtype"], 2)
        if g < 2 or r["message_size"] <= 0 or not r["latency"] > 0:
            continue
        S = r["message_size"] * eb
        info = (f"framework={r['framework']} version={r['version']} kernel={r['kernel_source']} "
                f"gpu='{r['device']}' allreduce_dtype={r['allreduce_dtype']} "
                f"elements={r['message_size']}")
        w.add_point(run, t, info, backend=backend, op="custom_all_reduce",
                    dtype=moe_dtype_name(r["allreduce_dtype"]),
                    shape=f"bytes={S},groups=1,ranks={g}", m=S, n=1, k=0, group_size=g,
                    bytes_=S, flops=0.0, seconds=r["latency"] * 1e-3,
                    bus_bw_factor=bus_factor("all_reduce", g),
                    value=gpu_value(t.system, r["device"]))


DEEPEP_OPTIONAL = {"normal": ("dispatch_notify_us", "combine_notify_us"), "ll": ()}

PAYLOAD_BYTES = {"bfloat16": 2.0, "fp8": 1.0 + 4.0 / 128, "nvfp4": 0.5 + 1.0 / 16,
                 "fp4": 0.5 + 1.0 / 16, "default": 2.0}


def _a2a_point(w, run, t, info, backend, phase, T, H, k, E, ep, nodes, variant, payload, sms,
               seconds, device_col):
    op = "moe_dispatch" if phase == "dispatch" else "moe_combine"
    shape = (f"tokens={T},hidden={H},topk={k},experts={E},ep={ep},nodes={nodes},"
             f"impl={variant},payload={payload},sms={sms}")
    pb = PAYLOAD_BYTES.get(payload, 2.0) if phase == "dispatch" else 2.0
    w.add_point(run, t, info, backend=backend, op=op, dtype=DTYPE.get(payload, payload),
                shape=shape, m=T, n=ep, k=H, group_size=ep, bytes_=T * k * H * pb, flops=0.0,
                seconds=seconds, value=gpu_value(t.system, device_col))


def import_moe_a2a(w: Writer, t: aic.Table, command: str, backend: str):
    run = w.add_run(t, backend, "deepep", max(r["ep_size"] for r in t.rows), command)
    for r in t.rows:
        if r["num_tokens"] <= 0 or not r["latency"] > 0:
            continue
        info = (f"framework={r['framework']} version={r['version']} kernel={r['kernel_source']} "
                f"gpu='{r['device']}' comm_backend={r['comm_backend']}")
        _a2a_point(w, run, t, info, backend, r["phase"], r["num_tokens"], r["hidden_size"],
                   r["topk"], r["num_experts"], r["ep_size"], r["node_num"], r["comm_backend"],
                   r["comm_dtype"], r["sms"], r["latency"] * 1e-6, r["device"])


def _number(v) -> float:
    """A numeric optional column read as text ("" when absent): its value, else 0."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def _attention_point(w, run, t, info, backend, *, decode, tokens, context, heads, kv_heads, qk,
                     v, seconds, device):
    """One attention-core point in the shape text the profiler's attention op writes (decode:
    `tokens` sequences of one new token over `context` keys; prefill: tokens / context prompts
    of `context` tokens, causal)."""
    pairs = tokens * context if decode else tokens * (context + 1) / 2.0  # query-key, per head
    kv_rows = tokens * context if decode else tokens
    shape = (f"decode={1 if decode else 0},tokens={tokens},context={context},heads={heads},"
             f"kv_heads={kv_heads},qk={qk},v={v}")
    bytes_ = 2.0 * (tokens * heads * (qk + v) + kv_rows * kv_heads * (qk + v))
    w.add_point(run, t, info, backend=backend, op="attention", dtype="bf16", shape=shape,
                m=tokens, n=context, k=heads, group_size=1, bytes_=bytes_,
                flops=2.0 * (qk + v) * pairs * heads, seconds=seconds,
                value=gpu_value(t.system, device))


def import_attention(w: Writer, t: aic.Table, command: str, backend: str, decode: bool):
    run = w.add_run(t, backend, "", 1, command)
    for r in t.rows:
        b, heads, kv, hd = r["batch_size"], r["num_heads"], r["num_key_value_heads"], r["head_dim"]
        if r["kv_cache_dtype"] != "bfloat16" or (r["window_size"] not in ("", "0")):
            continue  # moeplan's KV cache is the model's dtype; sliding windows are not modelled
        if not decode and r["attn_dtype"] != "bfloat16":
            continue
        context = r["isl"] + (r["step"] if decode else 0)
        if b <= 0 or heads <= 0 or kv <= 0 or hd <= 0 or context <= 0 or not r["latency"] > 0:
            continue
        info = (f"framework={r['framework']} version={r['version']} gpu='{r['device']}' "
                f"batch={b} isl={r['isl']}" + (f" step={r['step']}" if decode else "") +
                f" kernel={r['kernel_source'] or 'unnamed'}")
        _attention_point(w, run, t, info, backend, decode=decode,
                         tokens=b if decode else b * context, context=context, heads=heads,
                         kv_heads=kv, qk=hd, v=hd, seconds=r["latency"] * 1e-3,
                         device=r["device"])


def import_mla(w: Writer, t: aic.Table, command: str, backend: str, decode: bool):
    run = w.add_run(t, backend, "", 1, command)
    for r in t.rows:
        b, heads = r["batch_size"], r["num_heads"]
        if r["kv_cache_dtype"] != "bfloat16" or (not decode and r["mla_dtype"] != "bfloat16"):
            continue
        step = int(float(r["step"])) if r["step"] != "" else 0
        if not decode and step > 0:
            continue  # a chunk after a cached prefix: not the core's prompt shape
        context = r["isl"] + (step if decode else 0)
        if b <= 0 or heads <= 0 or context <= 0 or not r["latency"] > 0:
            continue
        info = (f"framework={r['framework']} version={r['version']} gpu='{r['device']}' "
                f"batch={b} isl={r['isl']}" + (f" step={step}" if decode else "") +
                f" kernel={r['kernel_source'] or 'unnamed'}")
        if decode:  # absorbed: every head over one 576-wide latent + rope key, V its first 512
            _attention_point(w, run, t, info, backend, decode=True, tokens=b, context=context,
                             heads=heads, kv_heads=1, qk=576, v=512,
                             seconds=r["latency"] * 1e-3, device=r["device"])
        else:  # expanded into per-head keys and values
            _attention_point(w, run, t, info, backend, decode=False, tokens=b * context,
                             context=context, heads=heads, kv_heads=heads, qk=192, v=128,
                             seconds=r["latency"] * 1e-3, device=r["device"])


def import_deepep(w: Writer, t: aic.Table, command: str, backend: str, mode: str, gpn: int):
    run = w.add_run(t, backend, "deepep", max(r["node_num"] for r in t.rows) * gpn, command)
    for r in t.rows:
        T = r["num_token"]
        if T <= 0:
            continue
        ep = r["node_num"] * gpn  # the collectors run one rank per GPU on every node
        info = (f"framework={r['framework']} version={r['version']} kernel={r['kernel_source']} "
                f"gpu='{r['device']}' deepep_mode={mode}")
        for phase in ("dispatch", "combine"):
            if mode == "normal":
                # DeepEP's normal kernels: the notify kernel (count exchange, barrier) runs
                # before the transmit kernel on the critical path; a point is both.
                us, sms = r[f"{phase}_transmit_us"], r[f"{phase}_sms"]
                notify = _number(r.get(f"{phase}_notify_us"))
                if us > 0 and notify > 0:
                    us += notify
            else:
                us, sms = r[f"{phase}_avg_t_us"], 0
            if not us > 0:
                continue
            # The collectors dispatch fp8 (values + per-128 scales) and combine bf16.
            payload = "fp8" if phase == "dispatch" else "bfloat16"
            _a2a_point(w, run, t, info, backend, phase, T, r["hidden_size"], r["num_topk"],
                       r["num_experts"], ep, r["node_num"], "deepep_" + mode, payload, sms,
                       us * 1e-6, r["device"])


def run_import(args) -> Writer:
    root = aic.find_data_root(args.data_dir)
    systems = root.systems()
    if args.system not in systems:
        raise BadInput(f"--system {args.system}: unknown system; expected one of {', '.join(systems)}")
    if args.framework not in FRAMEWORKS:
        raise BadInput(f"--framework {args.framework}: unknown framework; expected one of "
                       f"{', '.join(FRAMEWORKS)}")
    s, fw = args.system, args.framework
    moe_versions = root.versions(s, "moe", fw)
    version = args.version
    if version in (None, "current"):
        version = root.current_version(s, fw) or (moe_versions[-1] if moe_versions else None)
    if version not in moe_versions:
        raise BadInput(
            f"--version {args.version or 'current'}: {s} has no moe table for {fw} "
            f"{version or ''}".rstrip() + f"; expected one of {', '.join(moe_versions) or '(none)'}")
    device = args.device or aic.SYSTEM_DEVICE.get(s)
    if not device:
        raise BadInput(f"--system {s}: no moeplan device for it; expected --device NAME "
                       f"(a name in resources/devices/)")
    ops = [o for o in (args.ops or "").split(",") if o]
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        raise BadInput(f"--ops {args.ops}: unknown op {unknown[0]}; expected some of {', '.join(OPS)}")
    dtypes = [d for d in (args.dtypes or "").split(",") if d]
    w = Writer(device, f"aiconfigurator-core {root.package_version}", ops, dtypes)
    cmd = (f"import_aiconfigurator.py --system {s} --framework {fw} --version {version}")

    def fill(op, table):
        v = aic.pick_version(root, s, op, fw, version, table)
        return v

    # MoE (required): the requested version itself.
    import_moe(w, aic.read_table(root, s, "moe", fw, version, "moe_perf", aic.MOE_COLUMNS),
               cmd, fw)
    notes = []
    v = fill("gemm", "gemm_perf")
    if v:
        import_gemm(w, aic.read_table(root, s, "gemm", fw, v, "gemm_perf", aic.GEMM_COLUMNS),
                    cmd, fw)
        if v != version:
            notes.append(f"gemm from {fw} {v} (backward fill)")
    else:
        notes.append(f"no gemm table for {fw} <= {version}: GEMMs fall back to the roofline")
    # NCCL: framework-independent; default = the system's nccl_version (what aiconfigurator uses).
    nccl_versions = root.versions(s, "comm", "nccl")
    nv = args.nccl_version or str((root.system_yaml(s).get("misc") or {}).get("nccl_version") or "")
    if nv and nv not in nccl_versions:
        if args.nccl_version:
            raise BadInput(f"--nccl-version {nv}: {s} has no NCCL table for it; expected one of "
                           f"{', '.join(nccl_versions) or '(none)'}")
        nv = ""
    nv = nv or (nccl_versions[-1] if nccl_versions else "")
    if nv:
        import_nccl(w, aic.read_table(root, s, "comm", "nccl", nv, "nccl_perf", aic.NCCL_COLUMNS,
                                   aic.NCCL_OPTIONAL),
                    cmd + f" --nccl-version {nv}")
    else:
        notes.append("no NCCL table: collectives fall back to the roofline")
    v = fill("comm", "custom_allreduce_perf")
    if v:
        import_custom_ar(w, aic.read_table(root, s, "comm", fw, v, "custom_allreduce_perf",
                                           aic.CUSTOM_AR_COLUMNS), cmd, fw)
    gpn = int(((root.system_yaml(s).get("node") or {}).get("num_gpus_per_node")) or 8)
    v = fill("comm", "moe_a2a_perf")
    if v:
        import_moe_a2a(w, aic.read_table(root, s, "comm", fw, v, "moe_a2a_perf",
                                         aic.MOE_A2A_COLUMNS), cmd, fw)
    for mode, cols in (("normal", aic.DEEPEP_NORMAL_COLUMNS), ("ll", aic.DEEPEP_LL_COLUMNS)):
        # The multi-node DeepEP tables are sglang's (0.5.6.post2 on h100/h200); --deepep-version
        # reads them whatever the framework imported.
        dfw = "sglang" if args.deepep_version else fw
        v = args.deepep_version or fill("comm", f"wideep_deepep_{mode}_perf")
        if v:
            import_deepep(w, aic.read_table(root, s, "comm", dfw, v, f"wideep_deepep_{mode}_perf",
                                            cols, DEEPEP_OPTIONAL[mode]),
                          cmd + (f" --deepep-version {v}" if args.deepep_version else ""), dfw,
                          mode, gpn)
    # The attention core (GQA/MHA and MLA), where the framework has the tables.
    for op, table, cols, opt, fn, decode in (
            ("attention", "context_attention_perf", aic.ATTENTION_CONTEXT_COLUMNS,
             aic.ATTENTION_OPTIONAL, import_attention, False),
            ("attention", "generation_attention_perf", aic.ATTENTION_GENERATION_COLUMNS,
             aic.ATTENTION_OPTIONAL, import_attention, True),
            ("mla", "context_mla_perf", aic.MLA_CONTEXT_COLUMNS, aic.MLA_CONTEXT_OPTIONAL, import_mla,
             False),
            ("mla", "generation_mla_perf", aic.MLA_GENERATION_COLUMNS, aic.MLA_GENERATION_OPTIONAL,
             import_mla, True)):
        v = fill(op, table)
        if v:
            fn(w, aic.read_table(root, s, op, fw, v, table, cols, opt), cmd, fw, decode)
        else:
            notes.append(f"no {table} for {fw} <= {version}: that attention falls back to the "
                         f"roofline")
    w.notes = notes
    w.version = version
    return w


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", required=True, help="aiconfigurator system, e.g. h200_sxm")
    ap.add_argument("--framework", required=True, help="trtllm, sglang or vllm")
    ap.add_argument("--version", default=None,
                    help="framework version directory (default: aiconfigurator's current)")
    ap.add_argument("--nccl-version", default=None,
                    help="comm/nccl version (default: the system's nccl_version)")
    ap.add_argument("--deepep-version", default=None,
                    help="comm/sglang version of the DeepEP tables (wideep_deepep_*_perf; "
                         "default: the framework's own, backward-filled)")
    ap.add_argument("--device", default=None,
                    help="moeplan device name for the points (default: from the system)")
    ap.add_argument("--data-dir", default=None,
                    help="a copy of aiconfigurator_core/systems (default: the installed package)")
    ap.add_argument("--out", required=True, help="SQLite cost DB to write (replaced atomically)")
    ap.add_argument("--ops", default=None,
                    help="comma-separated ops to keep (default: all): " + ",".join(OPS))
    ap.add_argument("--dtypes", default=None,
                    help="comma-separated moeplan dtypes to keep, e.g. bf16,fp8 (default: all)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        w = run_import(args)
        w.write(args.out)
    except BadInput as e:
        print(f"import_aiconfigurator: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        counts = ", ".join(f"{op} {n}" for op, n in w.counts.items())
        print(f"{args.out}: {len(w.points)} points for device '{w.device}' from {w.source} "
              f"({args.system}, {args.framework} {w.version}): {counts}")
        for n in w.notes:
            print(f"  note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
