#!/usr/bin/env python3
"""Checks that a full build built everything the README promises and that the test run ran it.

  check_suite.py BUILD_DIR JUNIT_XML [--require-cuda]

A green `ctest` proves only that the tests it found passed. This checks what it cannot see:
  - the binaries exist: moeplan, moeplan-gui and every test and benchmark executable that the
    build defines (read from CTest's own test list);
  - every test CTest knows ran (none "not run" or disabled) and passed;
  - the suites that need a component ran: at least one test with each of the labels unit, gui
    (QTest suites, offscreen), mpi (real processes under mpirun), benchmark (smoke runs), slurm
    (a local two-node Slurm: srun, faults) and exports (each framework's own argument parser), and,
    where the CUDA backend was built (or --require-cuda), gpu (which skip visibly without a
    device). A test that skips saying why (GTEST_SKIP, matched by CTest's skip expression)
    counts as run; the counts of passed and skipped tests per label are printed.
Prints one line per check; exits 1 naming what is missing.
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

REQUIRED_BINARIES = ["moeplan", "moeplan-gui"]
REQUIRED_LABELS = ["unit", "gui", "mpi", "benchmark", "slurm", "exports"]


def cache_value(build_dir, key):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        return None
    return None


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    require_cuda = "--require-cuda" in argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build_dir, junit = args
    problems = []

    listing = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, check=True,
                             capture_output=True, text=True)
    tests = json.loads(listing.stdout)["tests"]
    labels = {}
    executables = set()
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels[t["name"]] = props.get("LABELS", [])
        cmd = t.get("command") or []
        if cmd and os.path.dirname(cmd[0]) == os.path.join(os.path.abspath(build_dir), "bin"):
            executables.add(os.path.basename(cmd[0]))
    # Test programs run through mpirun or bash name the binary later on the command line.
    for t in tests:
        for word in (t.get("command") or [])[1:]:
            if os.path.dirname(word) == os.path.join(os.path.abspath(build_dir), "bin"):
                executables.add(os.path.basename(word))

    cuda_built = cache_value(build_dir, "CMAKE_CUDA_COMPILER") not in (None, "", "NOTFOUND",
                                                                       "CMAKE_CUDA_COMPILER-NOTFOUND")
    required_labels = list(REQUIRED_LABELS)
    if require_cuda or cuda_built:
        required_labels.append("gpu")

    for exe in sorted(set(REQUIRED_BINARIES) | executables):
        path = os.path.join(build_dir, "bin", exe)
        if not os.access(path, os.X_OK):
            problems.append(f"binary missing: {path}")
    print(f"check-suite: {len(set(REQUIRED_BINARIES) | executables)} binaries expected "
          f"({', '.join(sorted(set(REQUIRED_BINARIES) | executables))})")

    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"check-suite: {junit}: cannot read the JUnit results ({e})", file=sys.stderr)
        return 1
    status = {}
    for case in root.iter("testcase"):
        name = case.get("name")
        if case.find("failure") is not None or case.find("error") is not None:
            status[name] = "failed"
        elif case.get("status") in ("notrun", "disabled"):
            skipped = case.find("skipped")
            # A test that printed its own skip (GTEST_SKIP with a reason, matched by CTest's
            # SKIP_REGULAR_EXPRESSION) ran and said why; anything else did not run.
            visible = (skipped is not None
                       and skipped.get("message") == "SKIP_REGULAR_EXPRESSION_MATCHED")
            status[name] = "skipped" if visible else case.get("status")
        else:
            status[name] = "passed"

    for name in labels:
        if name not in status:
            problems.append(f"test not in the results (did not run): {name}")
        elif status[name] not in ("passed", "skipped"):
            problems.append(f"test {status[name]}: {name}")
    passed_by_label = {}
    skipped_by_label = {}
    for name, st in status.items():
        for label in labels.get(name, []):
            if st == "passed":
                passed_by_label[label] = passed_by_label.get(label, 0) + 1
            elif st == "skipped":
                skipped_by_label[label] = skipped_by_label.get(label, 0) + 1
    for label in required_labels:
        passed = passed_by_label.get(label, 0)
        skipped = skipped_by_label.get(label, 0)
        print(f"check-suite: label {label}: {passed} passed, {skipped} skipped visibly")
        # The GPU tests skip with their reason where no device exists; every other label must
        # have run for real.
        if passed == 0 and not (label == "gpu" and skipped > 0):
            problems.append(f"no test with label '{label}' ran")
    counts = {st: list(status.values()).count(st) for st in sorted(set(status.values()))}
    print(f"check-suite: {len(labels)} tests defined; results: "
          + ", ".join(f"{n} {st}" for st, n in counts.items()))

    for p in problems:
        print(f"check-suite: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
