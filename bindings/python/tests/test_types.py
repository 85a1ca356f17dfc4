"""The package's types: the `.pyi` stub of the compiled module checked
against the module itself, and the annotated Python API checked by mypy.

mypy comes from PyPI into the venv scripts/test-all makes; without it the
tests skip and say so."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from conftest import skip


def mypy(test: str, cwd: Path, *args: str) -> None:
    """`python -m ARGS` from mypy, run away from the source tree (in `cwd`)
    so that the installed copy of the package is what gets checked; it
    must report nothing."""
    if importlib.util.find_spec("mypy") is None:
        skip(test, "mypy is not installed in this venv")
    out = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_stubs_match_the_compiled_module(gnomon, tmp_path):
    """mypy's stubtest imports the installed package (the wheel the tests
    built) and compares every name, parameter, kind and default of
    `gnomon._native` with `_native.pyi`, and type-checks the package's
    annotated modules on the way. Seen to fail with a parameter renamed in
    the stub, and with a default that differs from the module's."""
    mypy("test_types.py::test_stubs_match_the_compiled_module", tmp_path, "mypy.stubtest", "gnomon")


def test_the_api_type_checks_strictly(gnomon, tmp_path):
    """The package's own annotations hold under `mypy --strict`, as a
    caller's type checker reads them. Seen to fail with a return type made
    wrong in gnomon/__init__.py."""
    mypy(
        "test_types.py::test_the_api_type_checks_strictly",
        tmp_path,
        "mypy",
        "--strict",
        "--no-incremental",
        "-p",
        "gnomon",
    )
