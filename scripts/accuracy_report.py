#!/usr/bin/env python3
"""Markdown tables of a scripts/accuracy.sh series (docs/BENCHMARKS.md, issue 18).

    scripts/accuracy_report.py DIR

For each mode found in DIR (<mode>-run<k>.json): one row per run (median and worst |error| of the
cost DB and of the roofline), then one row per case with every run's measured time and error,
and the case's run-to-run spread of the measured layer ((max - min) / min over the runs): the
machine's own noise, against which the errors are read.
"""
import json
import pathlib
import re
import statistics
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: accuracy_report.py DIR", file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1])
    runs: dict[str, dict[int, dict]] = {}
    for path in sorted(root.glob("*-run*.json")):
        m = re.fullmatch(r"(.+)-run(\d+)\.json", path.name)
        if not m:
            continue
        try:
            runs.setdefault(m.group(1), {})[int(m.group(2))] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"accuracy_report.py: {path}: {e}", file=sys.stderr)
            return 1
    if not runs:
        print(f"accuracy_report.py: {root}: no <mode>-run<k>.json files", file=sys.stderr)
        return 1
    for mode, by_run in runs.items():
        print(f"### {mode}\n")
        print("| run | DB median | DB worst | roofline median | roofline worst |")
        print("|---|---|---|---|---|")
        for k, d in sorted(by_run.items()):
            s = d["summary"]
            print(f"| {k} | {100 * s['median_abs_error']:.1f}% | {100 * s['worst_abs_error']:.1f}% "
                  f"| {100 * s['roofline_median_abs_error']:.1f}% "
                  f"| {100 * s['roofline_worst_abs_error']:.1f}% |")
        pooled = [abs(r["error"]) for d in by_run.values() for r in d["rows"]]
        print(f"\npooled over {len(pooled)} case-runs: median {100 * statistics.median(pooled):.1f}%, "
              f"worst {100 * max(pooled):.1f}%\n")
        cases: dict[tuple, dict[int, dict]] = {}
        for k, d in sorted(by_run.items()):
            for r in d["rows"]:
                cases.setdefault((r["layout"], r["dispatcher"], r["tokens"]), {})[k] = r
        ks = sorted(by_run)
        print("| layout | dispatcher | tokens | " +
              " | ".join(f"run {k}: measured ms, error" for k in ks) + " | spread of measured |")
        print("|---|---|---|" + "---|" * len(ks) + "---|")
        spreads = []
        for (layout, disp, tokens), by_k in cases.items():
            cells = []
            for k in ks:
                r = by_k.get(k)
                cells.append(f"{r['measured_ms']:.1f}, {100 * r['error']:+.1f}%" if r else "—")
            measured = [r["measured_ms"] for r in by_k.values()]
            spread = (max(measured) - min(measured)) / min(measured)
            spreads.append(spread)
            print(f"| {layout} | {disp} | {tokens} | " + " | ".join(cells) + f" | {100 * spread:.1f}% |")
        print(f"\nrun-to-run spread of the measured layer: median {100 * statistics.median(spreads):.1f}%, "
              f"largest {100 * max(spreads):.1f}%\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
