"""Pod usage samples of a Kubernetes snapshot: Prometheus range queries and ``kubectl top pods`` outputs.

Two sources, either or both (samples of one pod at one time from both are merged,
keeping the larger value per dimension):

* ``prometheus/container_cpu_usage_seconds_total.json`` and
  ``prometheus/container_memory_working_set_bytes.json``: the JSON responses of the
  Prometheus HTTP API's range query (``/api/v1/query_range``), ``resultType`` ``matrix``,
  one series per pod (labels ``namespace`` and ``pod``) with ``[unix seconds, "value"]``
  pairs. CPU must already be a rate (cores), e.g.
  ``sum by (namespace,pod) (rate(container_cpu_usage_seconds_total{container!=""}[1m]))``;
  memory in bytes, e.g. ``sum by (namespace,pod) (container_memory_working_set_bytes{container!=""})``.
  Per-container series of one pod are summed; series whose ``container`` label is ``""``
  or ``"POD"`` (cAdvisor's pod-level and pause-container series) are skipped, since they
  would count the pod twice. Both files are needed (usage has cpu and memory).
* ``top/<unix seconds>.txt``: one ``kubectl top pods -A`` output per file (columns
  ``NAMESPACE NAME CPU(cores) MEMORY(bytes)``), its sample time the file name, e.g.
  written by ``kubectl top pods -A > top/$(date +%s).txt``.

Units written: ``cpu`` cores, ``mem`` GiB (bytes / 2**30), ``net`` 0 (no source measures
it). A time at which a pod has only one of cpu and memory is dropped (counted).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from packer.errors import Problem
from packer.io.k8s_objects import field
from packer.io.k8s_quantity import BYTES_PER_GIB, parse_quantity
from packer.io.trace import read_json_object

PROMETHEUS_DIR = "prometheus"
TOP_DIR = "top"
CPU_METRIC = "container_cpu_usage_seconds_total"
MEM_METRIC = "container_memory_working_set_bytes"
TOP_HEADER = ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"]
_SKIPPED_CONTAINERS = ("", "POD")


@dataclass
class UsageSamples:
    """Usage rows (``task_id``, ``ts`` Unix s, ``cpu`` cores, ``mem`` GiB, ``net`` Gbps) sorted by task and time,
    and what was left out: samples of pods that are not tasks, and times with only one of cpu and memory."""

    rows: pd.DataFrame
    other_pods: int
    incomplete: int


def _prometheus(path: Path, scale: float, problems: list[Problem]) -> dict[tuple[str, int], float]:
    """(``namespace/pod``, ts) -> summed value / ``scale`` of one Prometheus matrix response."""
    file = str(path)
    doc = read_json_object(path)
    out: dict[tuple[str, int], float] = {}
    try:
        if doc.get("status") != "success":
            raise ValueError(f"field 'status' is {doc.get('status')!r}, expected 'success' (a failed query)")
        if field(doc, "data.resultType", str) != "matrix":
            raise ValueError(f"field 'data.resultType' is {doc['data']['resultType']!r}: run a range query (query_range)")
        series = field(doc, "data.result", list)
    except ValueError as exc:
        problems.append(Problem(file, "", str(exc), 0))
        return out
    for i, s in enumerate(series):
        try:
            metric = field(s, "metric", dict)
            if metric.get("container") in _SKIPPED_CONTAINERS and "container" in metric:
                continue
            task = f"{field(metric, 'namespace', str)}/{field(metric, 'pod', str)}"
            for ts, value in field(s, "values", list):
                number = float(value)
                if not math.isfinite(number) or number < 0:
                    raise ValueError(f"value {value!r} at {ts} is not a finite number >= 0")
                key = (task, int(round(float(ts))))
                out[key] = out.get(key, 0.0) + number / scale
        except (ValueError, TypeError) as exc:
            problems.append(Problem(file, f"data.result[{i}]", str(exc), 1, (f"series {i} ({s.get('metric') if isinstance(s, dict) else s!r})",)))
    return out


def _top(path: Path, problems: list[Problem]) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], float]]:
    """cpu and mem by (``namespace/pod``, ts) of one ``kubectl top pods -A`` file."""
    file = str(path)
    cpu: dict[tuple[str, int], float] = {}
    mem: dict[tuple[str, int], float] = {}
    if not path.stem.isdigit():
        problems.append(Problem(file, "", "the file name must be the sample time in Unix seconds, e.g. top/1769162100.txt", 0))
        return cpu, mem
    ts = int(path.stem)
    lines = [line.split() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    if not lines or lines[0] != TOP_HEADER:
        problems.append(Problem(file, "", f"expected the header {' '.join(TOP_HEADER)} of `kubectl top pods -A`", 0))
        return cpu, mem
    for n, parts in enumerate(lines[1:], start=2):
        try:
            if len(parts) != 4:
                raise ValueError(f"expected 4 columns, got {len(parts)}")
            key = (f"{parts[0]}/{parts[1]}", ts)
            cpu[key] = float(parse_quantity(parts[2]))
            mem[key] = float(parse_quantity(parts[3])) / BYTES_PER_GIB
        except ValueError as exc:
            problems.append(Problem(file, "", str(exc), 1, (f"line {n} ({' '.join(parts)})",)))
    return cpu, mem


def has_usage(src: Path) -> bool:
    return (src / PROMETHEUS_DIR).is_dir() or (src / TOP_DIR).is_dir()


def read_usage(src: Path, tasks: set[str], problems: list[Problem]) -> UsageSamples:
    """The usage samples of ``tasks`` (``namespace/name``) in the snapshot folder ``src``; problems are appended."""
    cpu: dict[tuple[str, int], float] = {}
    mem: dict[tuple[str, int], float] = {}
    prom = src / PROMETHEUS_DIR
    if prom.is_dir():
        files = {metric: prom / f"{metric}.json" for metric in (CPU_METRIC, MEM_METRIC)}
        missing = [str(p) for p in files.values() if not p.exists()]
        if missing:
            problems.append(Problem(str(prom), "", f"missing {', '.join(missing)} (usage needs both cpu and memory)", 0))
        else:
            cpu = _prometheus(files[CPU_METRIC], 1.0, problems)
            mem = _prometheus(files[MEM_METRIC], float(BYTES_PER_GIB), problems)
    top = src / TOP_DIR
    if top.is_dir():
        files_top = sorted(top.glob("*.txt"))
        if not files_top:
            problems.append(Problem(str(top), "", "no *.txt files (one `kubectl top pods -A` output per file)", 0))
        for path in files_top:
            c, m = _top(path, problems)
            for mine, theirs in ((cpu, c), (mem, m)):
                for key, value in theirs.items():
                    mine[key] = max(mine.get(key, 0.0), value)
    keys = set(cpu) | set(mem)
    other = {k for k in keys if k[0] not in tasks}
    complete = sorted(k for k in keys - other if k in cpu and k in mem)
    rows = pd.DataFrame({
        "task_id": [k[0] for k in complete],
        "ts": [k[1] for k in complete],
        "cpu": [cpu[k] for k in complete],
        "mem": [mem[k] for k in complete],
        "net": 0.0,
    })
    return UsageSamples(rows=rows, other_pods=len({k[0] for k in other}), incomplete=len(keys) - len(other) - len(complete))
