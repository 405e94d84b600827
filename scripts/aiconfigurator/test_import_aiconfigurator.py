"""Unit tests of import_aiconfigurator.py on the committed fixture (tests/data/aiconfigurator).

    python3 -m unittest discover -s scripts/aiconfigurator -p 'test_*.py' -v

Tests that read Parquet need pyarrow and are skipped (visibly) without it; the bad-input tests
run everywhere. With aiconfigurator-core installed, one more test imports the full h200 tables.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
FIXTURE = os.path.join(REPO, "tests", "data", "aiconfigurator")
GOLDEN = os.path.join(FIXTURE, "h200_sxm_trtllm_fixture.sql")
sys.path.insert(0, HERE)

import import_aiconfigurator as imp  # noqa: E402

HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None
HAVE_PACKAGE = importlib.util.find_spec("aiconfigurator_core") is not None


def run(argv):
    """main(argv) -> (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = imp.main(argv)
    return rc, out.getvalue(), err.getvalue()


class ImportFixture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="aic-test-")
        self.db = os.path.join(self.tmp, "costs.db")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def base(self, *extra):
        return ["--system", "h200_sxm", "--framework", "trtllm", "--data-dir", FIXTURE,
                "--out", self.db, "--quiet", *extra]

    def leftovers(self):
        return sorted(os.listdir(self.tmp))

    # ---------------------------------------------------------------- bad input, no pyarrow needed

    def assert_bad(self, argv, *needles):
        rc, out, err = run(argv)
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.count("\n"), 1, err)  # one line
        for n in needles:
            self.assertIn(n, err)
        self.assertEqual(self.leftovers(), [], "nothing half-written")

    def test_unknown_system(self):
        self.assert_bad(self.base()[:1] + ["h900_sxm"] + self.base()[2:], "h900_sxm",
                        "expected one of h200_sxm")

    def test_unknown_framework(self):
        a = self.base()
        a[3] = "tensorflow"
        self.assert_bad(a, "tensorflow", "expected one of trtllm, sglang, vllm")

    def test_unknown_version(self):
        self.assert_bad(self.base("--version", "9.9.9"), "9.9.9", "expected one of 1.3.0rc20")

    def test_data_dir_without_tables(self):
        a = self.base()
        a[a.index("--data-dir") + 1] = self.tmp
        self.assert_bad(a, self.tmp, "expected a copy of aiconfigurator_core/systems")

    def test_unknown_op_filter(self):
        self.assert_bad(self.base("--ops", "moe_fused,flash_attention"), "flash_attention")

    @unittest.skipIf(HAVE_PACKAGE, "aiconfigurator-core is installed")
    def test_package_missing(self):
        a = [x for x in self.base() if x not in ("--data-dir", FIXTURE)]
        self.assert_bad(a, "aiconfigurator-core", "pip install")

    # ---------------------------------------------------------------- reading the fixture

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow not installed")
    def test_schema_and_provenance(self):
        rc, out, err = run(self.base())
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.leftovers(), ["costs.db"])  # the temp file was renamed
        db = sqlite3.connect(self.db)
        self.assertEqual(db.execute("SELECT version FROM moeplan_schema").fetchall(), [(2,)])
        cols = [r[1] for r in db.execute("PRAGMA table_info(points)")]
        self.assertEqual(cols, ["id", "run_id", "device", "backend", "op", "dtype", "shape", "m",
                                "n", "k", "group_size", "bytes", "flops", "median_s", "p10_s",
                                "p90_s", "repetitions", "bus_bandwidth", "disposition", "detail",
                                "measured_at", "provenance"])
        # the provenance column repeats the value kind of `detail`
        for detail, prov in db.execute("SELECT detail, provenance FROM points"):
            self.assertEqual(prov, "imported:" + detail.split("value=")[1].split()[0])
        ops = dict(db.execute("SELECT op, count(*) FROM points GROUP BY op").fetchall())
        self.assertEqual(ops, {"moe_fused": 30, "gemm": 6, "all_reduce": 36, "all_gather": 36,
                               "all_to_all": 16, "moe_dispatch": 4, "moe_combine": 4,
                               "attention": 16})
        self.assertEqual(db.execute("SELECT DISTINCT device FROM points").fetchall(), [("h200",)])
        # every point names its source table, kernel and measured/proxy status
        for (detail,) in db.execute("SELECT detail FROM points"):
            self.assertIn("source=aiconfigurator-core 0.12.0-fixture", detail)
            self.assertIn("table=h200_sxm/", detail)
            self.assertIn("kernel=", detail)
            self.assertRegex(detail, r"value=(measured|measured-as=fp16)( |$)")
        # every point refers to the run of its table
        runs = dict(db.execute("SELECT id, command FROM runs").fetchall())
        for run_id, detail in db.execute("SELECT run_id, detail FROM points"):
            table = detail.split("table=")[1].split()[0]
            self.assertIn("table=" + table, runs[run_id])

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow not installed")
    def test_values_are_the_table_values(self):
        import pyarrow.parquet as pq

        rc, _, err = run(self.base())
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(self.db)
        d = os.path.join(FIXTURE, "systems", "data", "h200_sxm")
        moe = pq.read_table(os.path.join(d, "moe/trtllm/1.3.0rc20/moe_perf.parquet")).to_pylist()
        for r in moe:
            shape = (f"tokens={r['num_tokens']},hidden=2048,inter=768,topk=8,experts=128,"
                     f"tp={r['moe_tp_size']},ep={r['moe_ep_size']},dist={r['distribution']},"
                     f"kernel=moe_torch_flow_cutlass")
            got = db.execute("SELECT median_s, m, n, k, group_size, dtype FROM points WHERE "
                             "op='moe_fused' AND shape=?", (shape,)).fetchall()
            self.assertEqual(len(got), 1, shape)
            t, m, n, k, g, dt = got[0]
            self.assertAlmostEqual(t, r["latency"] * 1e-3, delta=1e-15)  # ms -> s, exact
            self.assertEqual((m, n, k, g, dt), (r["num_tokens"], 768 // r["moe_tp_size"], 2048,
                                                r["moe_tp_size"] * r["moe_ep_size"], "bf16"))
        nccl = pq.read_table(os.path.join(d, "comm/nccl/2.29.2/nccl_perf.parquet")).to_pylist()
        ar = [r for r in nccl if r["op_name"] == "all_reduce" and r["num_gpus"] == 8
              and r["message_size"] == 134217728][0]
        t, bus, m = db.execute("SELECT median_s, bus_bandwidth, m FROM points WHERE "
                               "op='all_reduce' AND dtype='fp16' AND group_size=8 AND "
                               "m=268435456").fetchone()
        self.assertAlmostEqual(t, ar["latency"] * 1e-3, delta=1e-15)
        self.assertEqual(m, 2 * 134217728)  # elements of half -> bytes
        self.assertAlmostEqual(bus, m / t * 2 * 7 / 8, delta=1.0)  # nccl-tests busBw
        # attention: context rows are b prompts of isl tokens, generation rows one decode step of
        # b sequences over isl + step keys; MLA's decode is absorbed (576/512), its prefill
        # expanded (192/128, a K/V head per head)
        ctx = pq.read_table(os.path.join(
            d, "attention/trtllm/1.3.0rc20/context_attention_perf.parquet")).to_pylist()
        gen = pq.read_table(os.path.join(
            d, "attention/trtllm/1.3.0rc20/generation_attention_perf.parquet")).to_pylist()
        mla = pq.read_table(os.path.join(
            d, "mla/trtllm/1.3.0rc20/generation_mla_perf.parquet")).to_pylist()
        mla_ctx = pq.read_table(os.path.join(
            d, "mla/trtllm/1.3.0rc20/context_mla_perf.parquet")).to_pylist()
        for rows, decode, shape_of in (
                (ctx, False, lambda r: f"decode=0,tokens={r['batch_size'] * r['isl']},"
                                       f"context={r['isl']},heads=32,kv_heads=4,qk=128,v=128"),
                (gen, True, lambda r: f"decode=1,tokens={r['batch_size']},"
                                      f"context={r['isl'] + r['step']},heads=32,kv_heads=4,"
                                      f"qk=128,v=128"),
                (mla, True, lambda r: f"decode=1,tokens={r['batch_size']},"
                                      f"context={r['isl'] + r['step']},heads=16,kv_heads=1,"
                                      f"qk=576,v=512"),
                (mla_ctx, False, lambda r: f"decode=0,tokens={r['batch_size'] * r['isl']},"
                                           f"context={r['isl']},heads=16,kv_heads=16,qk=192,"
                                           f"v=128")):
            self.assertEqual(len(rows), 4)
            for r in rows:
                got = db.execute("SELECT median_s, dtype FROM points WHERE op='attention' AND "
                                 "shape=?", (shape_of(r),)).fetchall()
                self.assertEqual(len(got), 1, shape_of(r))
                self.assertAlmostEqual(got[0][0], r["latency"] * 1e-3, delta=1e-15)
                self.assertEqual(got[0][1], "bf16")
        # the bf16 proxy row carries the same time and says so
        t2, det = db.execute("SELECT median_s, detail FROM points WHERE op='all_reduce' AND "
                             "dtype='bf16' AND group_size=8 AND m=268435456").fetchone()
        self.assertEqual(t2, t)
        self.assertIn("value=measured-as=fp16", det)

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow not installed")
    def test_filters(self):
        rc, _, err = run(self.base("--ops", "moe_fused,all_reduce", "--dtypes", "bf16"))
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(self.db)
        self.assertEqual(sorted(db.execute("SELECT op, dtype, count(*) FROM points GROUP BY 1, 2")),
                         [("all_reduce", "bf16", 18), ("moe_fused", "bf16", 30)])

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow not installed")
    def test_corrupt_parquet_writes_nothing(self):
        fx = os.path.join(self.tmp, "fx")
        shutil.copytree(FIXTURE, fx)
        gemm = os.path.join(fx, "systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet")
        with open(gemm, "r+b") as f:
            f.truncate(os.path.getsize(gemm) // 2)
        out = os.path.join(self.tmp, "out")
        os.mkdir(out)
        db = os.path.join(out, "costs.db")
        with open(db, "w") as f:
            f.write("previous")
        rc, _, err = run(["--system", "h200_sxm", "--framework", "trtllm", "--data-dir", fx,
                          "--out", db])
        self.assertEqual(rc, 2)
        self.assertIn("gemm_perf.parquet: corrupt Parquet", err)
        self.assertIn("expected a Parquet table", err)
        self.assertEqual(err.count("\n"), 1)
        self.assertEqual(os.listdir(out), ["costs.db"])  # no temp file left
        with open(db) as f:
            self.assertEqual(f.read(), "previous")  # an existing DB is untouched on failure

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow not installed")
    def test_missing_column(self):
        import pyarrow.parquet as pq

        fx = os.path.join(self.tmp, "fx")
        shutil.copytree(FIXTURE, fx)
        p = os.path.join(fx, "systems/data/h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet")
        t = pq.read_table(p)
        pq.write_table(t.drop(["latency"]), p)
        rc, _, err = run(["--system", "h200_sxm", "--framework", "trtllm", "--data-dir", fx,
                          "--out", os.path.join(self.tmp, "x.db")])
        self.assertEqual(rc, 2)
        self.assertIn("moe_perf.parquet: missing column(s) latency", err)

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow not installed")
    def test_golden_dump(self):
        """The committed SQL dump (a DB for C++ tests without pyarrow) is what the importer
        writes from the fixture."""
        os.environ["SOURCE_DATE_EPOCH"] = "0"
        try:
            rc, _, err = run(self.base())
        finally:
            del os.environ["SOURCE_DATE_EPOCH"]
        self.assertEqual(rc, 0, err)
        dump = "\n".join(sqlite3.connect(self.db).iterdump()) + "\n"
        with open(GOLDEN, encoding="utf-8") as f:
            self.assertEqual(dump, f.read(), "regenerate: see tests/data/aiconfigurator/README.md")

    @unittest.skipUnless(HAVE_PYARROW and HAVE_PACKAGE, "aiconfigurator-core or pyarrow missing")
    def test_full_package_tables(self):
        rc, _, err = run(["--system", "h200_sxm", "--framework", "trtllm", "--out", self.db,
                          "--quiet", "--dtypes", "bf16,fp16"])
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(self.db)
        n = dict(db.execute("SELECT op, count(*) FROM points GROUP BY op").fetchall())
        self.assertGreater(n["moe_fused"], 10000)
        self.assertGreater(n["gemm"], 10000)
        self.assertGreater(n["attention"], 10000)  # GQA/MHA and MLA, context and generation
        self.assertIn("all_reduce", n)


if __name__ == "__main__":
    unittest.main()
