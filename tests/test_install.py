"""`pip install .` (not editable) into a clean virtual environment, then the main command on the shipped sample from
another folder: the wheel carries the models and the sample trace, and nothing reads the checkout."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd, cwd: Path, timeout: float = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _install(base: Path) -> Path:
    """A fresh venv with packer installed from a wheel built from this checkout (with its dependencies); its bin folder."""
    base.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run(*pip, "wheel", "--no-deps", "-w", base / "wheel", ROOT, cwd=base)
    wheel = next((base / "wheel").glob("packer-*.whl"))
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    bin_dir = base / "venv" / ("Scripts" if os.name == "nt" else "bin")
    _run(bin_dir / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install", wheel, cwd=base)
    return bin_dir


def test_the_installed_packer_solves_the_shipped_sample_from_another_folder(tmp_path):
    """One test, so that parallel workers build and install once (about 45 s, most of it pip installing the dependencies)."""
    installed = _install(tmp_path / "install")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run(installed / "python", "-c", "import packer, packer.io.resources as r; print(packer.__file__); print(r.models_dir())",
                 cwd=elsewhere).split()
    assert all(str(ROOT) not in line and "site-packages" in line for line in where), where
    out = _run(installed / "packer", "solve", "packer:sample", "--time-limit", "5", cwd=elsewhere)
    assert "check it with: packer verify packer:sample out/sample/plan-p99" in out
    verified = _run(installed / "packer", "verify", "packer:sample", "out/sample/plan-p99", cwd=elsewhere)
    assert "valid; summary verified" in verified

    code = ("import packer; sample_trace = packer.sample_trace; "
            "plan = packer.solve(packer.read_trace(sample_trace()), config='baseline', max_moves=50, time_limit=5); "
            "plan.write('plan'); print(packer.verify(sample_trace(), 'plan').ok)")
    assert _run(installed / "python", "-c", code, cwd=elsewhere).strip().endswith("True")
