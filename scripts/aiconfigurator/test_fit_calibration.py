#!/usr/bin/env python3
"""Tests of fit_calibration.py's forms (numpy needed; skipped, saying so, without it).

    python3 -m unittest discover -s scripts/aiconfigurator -p 'test_*.py'
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import fit_calibration as fc  # noqa: E402

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


@unittest.skipUnless(HAVE_NUMPY, "numpy not installed (bash scripts/install-deps.sh --gpu-tables)")
class MoeForm(unittest.TestCase):
    def setUp(self):
        import numpy as np

        self.np = np
        cal = json.load(open(os.path.join(REPO, "resources", "devices", "calibration",
                                          "h200.json"), encoding="utf-8"))
        f = cal["device_figures"]
        self.dev = {"bf16": f["peak_bf16_flops"], "fp8": f["peak_fp8_flops"],
                    "hbm": f["hbm_bandwidth_bytes_per_s"]}
        q = cal["moe_grouped_ffn"]["bf16"]["parameters"]
        p = [q[k] for k in fc.MOE_PARAMS]
        p[8] = q["blend_exponent"] - 1.0  # the fit's parameter is q - 1
        self.p = np.array(p)

    def shape(self, N, H, I, k, E, tp, ep):
        np = self.np
        return {c: np.array([float(v)]) for c, v in
                zip(("N", "H", "I", "k", "E", "tp", "ep"), (N, H, I, k, E, tp, ep))}

    def test_row_tiles(self):
        np = self.np
        # half a row per group: non-empty with probability 1/2; 1 and 128 rows one tile, 129 two
        got = fc.row_tiles(np, np.array([0.5, 1.0, 128.0, 129.0, 1024.0]), 16)
        self.assertEqual(list(got), [8.0, 16.0, 16.0, 32.0, 128.0])

    def test_per_tile_cost_is_the_tiles_times_the_fitted_cost(self):
        np = self.np
        d = self.shape(16384, 2048, 768, 8, 128, 8, 1)  # 128 groups of 1,024 rows, width 96
        base = fc.calibrated_moe(np, d, self.dev, "bfloat16", self.p)[0]
        p2 = self.p.copy()
        p2[5] *= 2.0
        more = fc.calibrated_moe(np, d, self.dev, "bfloat16", p2)[0]
        # tiles: 128 groups x 8 row tiles x (ceil(192/128) + ceil(2048/128)) column tiles
        self.assertAlmostEqual((more - base) / self.p[5], 128 * 8 * (2 + 16), delta=1e-3)

    def test_fixed_part_grows_with_the_hidden_size(self):
        np = self.np
        p2 = self.p.copy()
        p2[9] = 0.0
        d = self.shape(8, 2048, 768, 8, 128, 1, 8)
        diff = (fc.calibrated_moe(np, d, self.dev, "bfloat16", self.p)[0] -
                fc.calibrated_moe(np, d, self.dev, "bfloat16", p2)[0])
        self.assertAlmostEqual(diff, self.p[9] * 2048, delta=1e-15)

    def test_reference_value_of_the_cpp_test(self):
        # tests/planner/test_roofline_calibrated.cpp checks the C++ form against this value
        np = self.np
        got = fc.calibrated_moe(np, self.shape(512, 2048, 768, 8, 128, 1, 8), self.dev,
                                "bfloat16", self.p)[0]
        self.assertAlmostEqual(got / 6.596444340753113e-05, 1.0, delta=1e-12)


class NicBytes(unittest.TestCase):
    def test_remote_nodes_of_uniform_top_k(self):
        import math

        # 2 nodes of 128 experts: a token stays local only if all 8 experts are local
        self.assertAlmostEqual(fc.expected_remote_nodes(2, 256, 8),
                               1.0 - math.comb(128, 8) / math.comb(256, 8), places=12)
        self.assertEqual(fc.expected_remote_nodes(1, 256, 8), 0.0)
        # more nodes than top-k: at most k nodes are hit, (n-1)/n of them remote on average
        self.assertLess(fc.expected_remote_nodes(64, 256, 8), 8.0 * 63 / 64)

    def test_payload_and_bytes(self):
        self.assertEqual(fc.deepep_payload("dispatch", 7168), 7168 + 224)  # fp8 + fp32 scales
        self.assertEqual(fc.deepep_payload("combine", 7168), 2 * 7168)  # bf16
        # low-latency: every (token, expert) pair on a remote node
        self.assertEqual(fc.nic_bytes("ll", "combine", 4, 128, 7168, 8, 256),
                         128 * 8 * 3 / 4 * 2 * 7168)
        self.assertAlmostEqual(fc.nic_bytes("normal", "combine", 2, 128, 7168, 8, 256),
                               128 * fc.expected_remote_nodes(2, 256, 8) * 2 * 7168)


@unittest.skipUnless(HAVE_NUMPY and importlib.util.find_spec("scipy") is not None,
                     "numpy/scipy not installed (bash scripts/install-deps.sh --gpu-tables)")
class NicFit(unittest.TestCase):
    def test_fit_recovers_a_known_curve(self):
        import numpy as np

        truth = np.array([30e-6, 0.85, 2e6, 0.6])
        S = np.geomspace(1e4, 2e9, 24)
        y = fc.nic_seconds(np, S, truth)
        got = fc.fit_logspace(np, lambda p: np.log(fc.nic_seconds(np, S, p) / y),
                              (y.min(), 0.8, 1e6, 0.7))
        self.assertLess(np.max(np.abs(fc.nic_seconds(np, S, got) / y - 1.0)), 1e-6)
        self.assertAlmostEqual(got[1], 0.85, places=4)  # the maximum efficiency
        # efficiency = bytes / ((t - latency) * NIC): below the maximum at every size
        eff = S / ((y - truth[0]) * fc.NIC_BANDWIDTH)
        self.assertTrue(np.all(eff < 0.85))


if __name__ == "__main__":
    unittest.main()
