"""Shared by the per-framework checkers: the case file, argv capture, the result line.

A checker runs in the framework's own virtual environment (its Python version, its light
dependencies) as `python check_<fw>.py CASE.json`, and prints one JSON line starting with
`RESULT ` on stdout: {"ok": bool, "errors": [...], "notes": [...], "faked": [...]}.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_case() -> dict:
    with open(sys.argv[1]) as f:
        return json.load(f)


class Result:
    def __init__(self):
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.faked: list[str] = []

    def error(self, msg: str):
        self.errors.append(msg)

    def note(self, msg: str):
        self.notes.append(msg)

    def emit(self):
        out = {"ok": not self.errors, "errors": self.errors, "notes": self.notes,
               "faked": self.faked}
        sys.stdout.write("RESULT " + json.dumps(out) + "\n")
        sys.stdout.flush()


def run_checker(body):
    """Run body(case, result), turning an exception into an error with its last frames."""
    res = Result()
    try:
        body(load_case(), res)
    except BaseException as e:  # noqa: BLE001 - SystemExit from argparse included
        tb = traceback.format_exception(e)
        res.error(f"{type(e).__name__}: {e}".strip() + "\n" + "".join(tb[-3:]).rstrip())
    res.emit()


def capture_command(script: str, program: str, env: dict[str, str], res: Result) -> list[str]:
    """Run an exported launch script with `program` (python3, vllm) replaced by a shim on PATH
    that records its argv, so that the arguments are exactly what bash hands the framework.
    A script bash cannot run is an error; the check then goes on with a copy whose
    `${VAR:?message}` messages have their apostrophes removed (the known cause), so that the
    framework's parser still sees the arguments."""
    try:
        return _capture(script, program, env)
    except subprocess.CalledProcessError as e:
        res.error(f"bash cannot run {Path(script).name}: {e.stderr.strip()}")
    import re

    text = Path(script).read_text()
    fixed = re.sub(r"(\$\{[A-Z_]+:\?[^}]*)'", r"\1", text)
    # beside the original, so that the script's "$HERE" still finds the files it names
    folder = Path(script).parent
    if not os.access(folder, os.W_OK):
        folder = Path(tempfile.mkdtemp())
    copy = folder / f".moeplan-check-{Path(script).name}"
    copy.write_text(fixed)
    res.note("checked the rest on a copy without apostrophes in ${VAR:?...} messages")
    try:
        return _capture(str(copy), program, env)
    finally:
        copy.unlink()


def _capture(script: str, program: str, env: dict[str, str]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        shim = Path(tmp) / program
        out = Path(tmp) / "argv"
        shim.write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" > "{out}"\n')
        shim.chmod(0o755)
        e = dict(os.environ)
        e.update(env)
        e["PATH"] = f"{tmp}:{e.get('PATH', '')}"
        subprocess.run(["bash", script], env=e, check=True, capture_output=True, text=True)
        return out.read_bytes().decode().split("\0")[:-1]


def bash_array(script: str, name: str) -> list[str]:
    """The elements of a bash array a sourced file defines."""
    cmd = f'source {shlex.quote(script)}; printf "%s\\0" "${{{name}[@]}}"'
    out = subprocess.run(["bash", "-c", cmd], check=True, capture_output=True).stdout
    return out.decode().split("\0")[:-1]


class WarningCollector(logging.Handler):
    """Collects warnings the framework logs while parsing (deprecations are errors)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record):
        try:
            self.records.append(record.getMessage())
        except Exception:  # noqa: BLE001
            self.records.append(str(record.msg))

    def deprecations(self) -> list[str]:
        import re

        plain = [re.sub(r"\x1b\[[0-9;]*m", "", r) for r in self.records]
        return [r for r in plain if "deprecat" in r.lower()]
