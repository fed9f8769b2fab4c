"""Set up a virtual environment and run packer's main job or its tests.

    python3 dev.py demo    # set up, then run the main job on the shipped sample trace
    python3 dev.py test    # set up, then run the test suite (what CI runs)
    python3 dev.py lowest  # the test suite on the lowest versions pyproject.toml allows (.venv-lowest)

Needs only Python 3.11+ with pip and venv. The environment lives in .venv/ and is
reinstalled when pyproject.toml changes. Extra arguments go to the command run
(e.g. `python3 dev.py test -m slow`).
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".packer-installed"


def ensure_venv() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("installing packer and its dependencies into .venv ...", flush=True)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(wanted)


def lowest(args: list[str]) -> None:
    """Install every dependency at its lower bound into .venv-lowest, then run the tests there (the install test aside)."""
    import tomllib  # here, so that Python < 3.11 reaches main's message instead of an ImportError

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [re.sub(r">=([^,]+)(,.*)?$", r"==\1.*", spec) for spec in project["dependencies"] + project["optional-dependencies"]["test"]]
    env = ROOT / ".venv-lowest"
    python = env / BIN.name / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(env)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    run(*pip, *pins)
    run(*pip, "--no-deps", "-e", str(ROOT))
    run(str(python), "-m", "pytest", "-n", "2", "--deselect", "tests/test_install.py", *args)


def run(*cmd: str) -> None:
    code = subprocess.run(list(cmd), cwd=ROOT).returncode
    if code:
        sys.exit(code)


def demo(args: list[str]) -> None:
    packer = str(BIN / "packer")
    run(packer, "validate", "traces/sample")
    run(packer, "solve", "traces/sample", "--goal", "tco", "--time-limit", "20", *args)
    run(packer, "verify", "traces/sample", "out/sample/plan-p99")


def test(args: list[str]) -> None:
    run(str(BIN / "python"), "-m", "pytest", "-n", "2", *args)


def main() -> None:
    commands = {"demo": demo, "test": test, "lowest": lowest}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    if sys.version_info < (3, 11):
        sys.exit(f"packer needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if sys.argv[1] != "lowest":
        ensure_venv()
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
