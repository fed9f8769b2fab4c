"""Import the Alibaba openb GPU cluster trace (cluster-trace-gpu-v2023) as a requests-only native trace.

Input folder: ``openb_node_list_all_node.csv`` (``sn,cpu_milli,memory_mib,gpu,model``)
and a pod list (``openb_pod_list_default.csv``, ``openb_pod_list_gpuspec33.csv`` or
any file with the same columns: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and
optionally ``gpu_spec``, ``pod_phase``, ...).

Fleet (written as the trace's own ``fleet.toml``): one architecture per distinct
node shape, named ``cpu<cores>-mem<GiB>`` or ``cpu<cores>-mem<GiB>-gpu<n>-<model>``:

* ``cores`` = cpu_milli / 1000; ``mem`` GiB = memory_mib / 1024; ``gpu`` = GPUs per
  node (a capacity in GPUs); ``gpu_model`` = the node's GPU model (an attribute).
* ``score`` = cores / 32: the trace names no CPU model, so every core is counted as a
  Broadwell18 core (score 1.0 per 32 cores, as in ``models/fleet.toml``).
* ``type``: ``"I"`` for nodes without GPUs, ``"II"`` for GPU nodes.
* ``cost`` (an assumption; the trace has no prices): cores / 32 + ``gpu_cost`` per GPU,
  i.e. a CPU node is priced like the default catalog's Type I host (32 cores = 1.0)
  scaled by its cores, and each GPU adds ``gpu_cost`` (default 1.0: one GPU costs as
  much as 32 cores). Edit the written ``fleet.toml`` to use real prices.
* ``net``: the trace has no network data; every node gets a nominal ``net_capacity``
  (default 25 Gbps) and every pod ``net_request`` 0, so the dimension never binds.

Pods become tasks (``task_id = job_id = name``; the list carries no job grouping):
``cpu_request`` = cpu_milli / 1000 cores, ``mem_request`` = memory_mib / 1024 GiB,
``gpu_request`` = num_gpu x gpu_milli / 1000 GPUs. A fractional request (one GPU
shared, e.g. 0.47) is summed per node like any other resource: a relaxation of
GPU-level packing (three 0.6-GPU pods pass on a 2-GPU node although no single GPU
can hold two of them). ``gpu_spec`` (``|``-separated GPU models) becomes
``allowed_archs``: the architectures whose ``gpu_model`` is in the spec.

Which pods: by default those in phase ``Running`` (5,193 of openb's 8,152): the
pods running when the trace was taken, i.e. the cluster's current state, which is
what packer repacks. The whole list (``phases=None``, CLI ``--phase all``) is the
workload the trace's authors replay to fill the cluster until it fails (Weng et al.,
ATC 2023): it asks for 98% of the cluster's GPUs, and first-fit decreasing leaves
about a thousand pods without a node (see ``drop_unfit``). Pending pods never got a
node in the original cluster; Failed and Succeeded pods had ended.

Placement: the trace assigns no pods to nodes, so an initial placement is built by
requests with first-fit decreasing over the nodes in list order, honouring cpu, mem,
gpu and ``allowed_archs``: pods with the most GPUs first, then constrained pods,
then by cpu/max_cpu + mem/max_mem. A pod left without a node (none fits it alone, or
the nodes filled up) raises :class:`InfeasibleError` naming the pods, unless
``drop_unfit`` is set: then it is left out and reported with the reason.

Invalid node rows always fail the import (the fleet must be exact); invalid pod
rows fail it too unless ``skip_invalid``, which drops and counts them.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from packer.io.atomic import refuse_to_overwrite_input
from packer.errors import InfeasibleError, InputError, Problem
from packer.io.importers.cluster_trace import toml_number
from packer.io.importers.initial_placement import first_fit_decreasing
from packer.io.importers.summary import ImportSummary
from packer.io.trace import write_trace
from packer.io.validate import check_ids, problem_if

log = logging.getLogger(__name__)

NODE_FILE = "openb_node_list_all_node.csv"
POD_FILES = {"default": "openb_pod_list_default.csv", "gpuspec33": "openb_pod_list_gpuspec33.csv"}
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
MILLI = 1000
MIB_PER_GIB = 1024
#: Cores per 1.0 of throughput score: Broadwell18 (32 cores, score 1.0) in models/fleet.toml.
CORES_PER_SCORE = 32
DEFAULT_GPU_COST = 1.0
DEFAULT_NET_CAPACITY = 25.0
#: Dimensions of the initial placement (net requests are all 0).
PLACEMENT_DIMS = ("cpu", "mem", "gpu")


def _read_csv(path: Path, required: Sequence[str], strings: Sequence[str]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype={c: "string" for c in strings})
    except FileNotFoundError:
        raise InputError([Problem(str(path), "", "file not found", 0)]) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        raise InputError([Problem(str(path), "", f"not a readable CSV: {exc}", 0)]) from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError([Problem(str(path), ", ".join(missing), f"required column missing (the file has: {', '.join(df.columns)})", 0)])
    if df.empty:
        raise InputError([Problem(str(path), "", "the file has no rows", 0)])
    return df


def _amount_problems(file: str, df: pd.DataFrame, columns: Sequence[str], id_col: str) -> tuple[list[Problem], np.ndarray]:
    """Non-numeric, missing, infinite or negative amounts; numeric columns are converted in place."""
    problems: list[Problem] = []
    bad = np.zeros(len(df), dtype=bool)
    for col in columns:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
        values = df[col].to_numpy()
        for message, mask in (("missing or non-numeric value", ~np.isfinite(values)), ("negative value", values < 0)):
            problems += problem_if(file, col, message, df, mask, [id_col, col])
            bad |= mask
    return problems, bad


def _fmt(x: float) -> str:
    return f"{x:g}"


def _read_nodes(path: Path) -> pd.DataFrame:
    """Nodes with ``cores``, ``mem`` (GiB), ``gpu`` (count), ``model`` and their ``arch`` name."""
    file = str(path)
    nodes = _read_csv(path, NODE_COLUMNS, ["sn", "model"])
    problems, _ = _amount_problems(file, nodes, ("cpu_milli", "memory_mib", "gpu"), "sn")
    problems += check_ids(file, nodes, "sn")
    gpu = nodes["gpu"].to_numpy()
    problems += problem_if(file, "cpu_milli", "a node needs cpu_milli > 0", nodes, nodes["cpu_milli"].to_numpy() == 0, ["sn", "cpu_milli"])
    problems += problem_if(file, "gpu", "GPU count is not a whole number", nodes, np.isfinite(gpu) & (gpu != np.round(gpu)), ["sn", "gpu"])
    model = nodes["model"].str.strip().replace("", pd.NA)
    problems += problem_if(file, "model", "GPU node without a GPU model", nodes, (gpu > 0) & model.isna().to_numpy(), ["sn", "gpu", "model"])
    if problems:
        raise InputError(problems)

    has_gpu = nodes["gpu"] > 0
    out = pd.DataFrame(
        {
            "host_id": nodes["sn"].str.strip(),
            "cores": nodes["cpu_milli"] / MILLI,
            "mem": nodes["memory_mib"] / MIB_PER_GIB,
            "gpu": nodes["gpu"],
            "model": model.where(has_gpu, pd.NA),
        }
    )
    shapes = out[["cores", "mem", "gpu", "model"]].drop_duplicates().reset_index(drop=True)
    names = []
    for s in shapes.itertuples():  # one per distinct node shape (27 in openb)
        name = f"cpu{_fmt(s.cores)}-mem{_fmt(s.mem)}"
        if s.gpu > 0:
            name += f"-gpu{_fmt(s.gpu)}-{s.model}"
        names.append("".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in name))
    shapes["arch"] = names
    return out.merge(shapes, on=["cores", "mem", "gpu", "model"], how="left", validate="many_to_one")


def _fleet_table(nodes: pd.DataFrame, gpu_cost: float, net_capacity: float) -> pd.DataFrame:
    """One row per architecture (sorted: CPU-only first, then by size), with ``type``, ``score``, ``cost`` and node count."""
    archs = nodes.groupby("arch", sort=False).agg(cores=("cores", "first"), mem=("mem", "first"), gpu=("gpu", "first"), model=("model", "first"), nodes=("host_id", "size"))
    archs = archs.sort_values(["gpu", "cores", "mem", "model"], na_position="first")
    archs["type"] = np.where(archs["gpu"] > 0, "II", "I")
    archs["score"] = archs["cores"] / CORES_PER_SCORE
    archs["cost"] = archs["cores"] / CORES_PER_SCORE + gpu_cost * archs["gpu"]
    archs["net"] = net_capacity
    return archs


def _fleet_toml(archs: pd.DataFrame, source: Path, gpu_cost: float, net_capacity: float) -> str:
    lines = [
        "# Fleet of the Alibaba openb GPU cluster, written by `packer import openb` from",
        f"# {source}.",
        "# One architecture per distinct node shape; the comment after each name counts its nodes.",
        "# Units: cores; mem GiB (memory_mib / 1024); gpu = GPUs per node;",
        f"# net Gbps, nominal ({net_capacity:g}): the trace has no network data.",
        "# score = cores / 32: no CPU model is given, so a core counts as a Broadwell18 core.",
        '# type: "I" = no GPU, "II" = GPU node.',
        f"# cost (assumed, the trace has no prices) = cores / 32 + {gpu_cost:g} per GPU. Edit to use real prices.",
    ]
    for name, a in archs.iterrows():  # one per architecture
        lines += ["", f"[arch.{json.dumps(name)}]  # {a['nodes']} nodes", f'type = "{a["type"]}"']
        lines += [f"{key} = {toml_number(a[key])}" for key in ("cores", "mem", "gpu")]
        if a["gpu"] > 0:
            lines.append(f"gpu_model = {json.dumps(str(a['model']))}")
        lines += [f"{key} = {toml_number(a[key])}" for key in ("net", "score", "cost")]
    return "\n".join(lines) + "\n"


def _pods_path(src: Path, pods: str | Path) -> Path:
    if str(pods) in POD_FILES:
        return src / POD_FILES[str(pods)]
    path = Path(pods)
    return path if path.exists() or not (src / path).exists() else src / path


def _read_pods(path: Path, skip_invalid: bool) -> tuple[pd.DataFrame, list[Problem], int]:
    """Valid pods, the problems skipped and the number of rows dropped."""
    file = str(path)
    pods = _read_csv(path, POD_COLUMNS, ["name", "gpu_spec", "pod_phase"])
    problems, bad = _amount_problems(file, pods, ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"), "name")
    over = pods["gpu_milli"].to_numpy() > MILLI
    problems += problem_if(file, "gpu_milli", f"more than {MILLI} milli-GPU of one GPU", pods, over, ["name", "gpu_milli"])
    bad |= over
    fixed = check_ids(file, pods, "name")  # a duplicate id is ambiguous, never skipped
    if fixed or (problems and not skip_invalid):
        raise InputError(fixed + problems)
    return pods[~bad].reset_index(drop=True), problems, int(bad.sum())


def _allowed_archs(spec: pd.Series, archs: pd.DataFrame) -> pd.Series:
    """``|``-joined architectures whose GPU model is named in each pod's ``gpu_spec`` (null: no constraint)."""
    spec = spec.str.strip().replace("", pd.NA)
    mapping = {}
    for text in spec.dropna().unique():  # one per distinct spec (17 in gpuspec33)
        models = {m.strip() for m in str(text).split("|") if m.strip()}
        mapping[text] = "|".join(archs.index[archs["model"].isin(models).to_numpy()])
    return spec.map(mapping).astype(object).where(spec.notna(), None)


def import_openb(
    src: str | Path,
    out: str | Path,
    pods: str | Path = "default",
    phases: Sequence[str] | None = ("Running",),
    gpu_cost: float = DEFAULT_GPU_COST,
    net_capacity: float = DEFAULT_NET_CAPACITY,
    skip_invalid: bool = False,
    drop_unfit: bool = False,
) -> ImportSummary:
    """Convert an openb folder into a requests-only native trace at ``out`` (see the module docstring).

    ``pods``: ``"default"``, ``"gpuspec33"`` or a pod-list path; ``phases``: keep
    only pods whose ``pod_phase`` is listed (default ``Running``; ``None``: all pods); ``gpu_cost``: cost
    units per GPU in the written catalog; ``net_capacity``: nominal Gbps per node.
    Units written: cores, GiB, GPUs, Gbps. Raises :class:`InputError` (bad files,
    columns, rows) or :class:`InfeasibleError` (pods without a node, unless ``drop_unfit``).
    """
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise InputError([Problem(str(src), "", f"openb folder not found (expected {NODE_FILE} and a pod list)", 0)])
    if not (gpu_cost >= 0 and net_capacity >= 0):
        raise InputError(f"gpu cost and net capacity must be >= 0, got {gpu_cost} and {net_capacity}")
    pods_path = _pods_path(src, pods)
    refuse_to_overwrite_input(out, src)
    refuse_to_overwrite_input(out, pods_path)

    nodes = _read_nodes(src / NODE_FILE)
    archs = _fleet_table(nodes, gpu_cost, net_capacity)
    pod_list, skipped, skipped_rows = _read_pods(pods_path, skip_invalid)
    records = len(pod_list) + skipped_rows
    filtered = 0
    if phases:
        if "pod_phase" not in pod_list.columns:
            raise InputError([Problem(str(pods_path), "pod_phase", "column missing: cannot filter by phase", 0)])
        known = set(pod_list["pod_phase"].dropna())
        unknown = sorted(set(phases) - known)
        if unknown:
            raise InputError([Problem(str(pods_path), "pod_phase", f"no pod has phase {', '.join(unknown)} (phases in the file: {', '.join(sorted(known))})", 0)])
        keep = pod_list["pod_phase"].isin(list(phases)).to_numpy()
        filtered = int((~keep).sum())
        pod_list = pod_list[keep].reset_index(drop=True)
    if pod_list.empty:
        raise InputError([Problem(str(pods_path), "", "no pods left to import", 0)])

    tasks = pd.DataFrame(
        {
            "task_id": pod_list["name"].str.strip().astype(object),
            "job_id": pod_list["name"].str.strip().astype(object),
            "cpu_request": pod_list["cpu_milli"] / MILLI,
            "mem_request": pod_list["memory_mib"] / MIB_PER_GIB,
            "net_request": 0.0,
            "gpu_request": pod_list["num_gpu"] * pod_list["gpu_milli"] / MILLI,
        }
    )
    allowed = _allowed_archs(pod_list["gpu_spec"], archs) if "gpu_spec" in pod_list.columns else pd.Series(None, index=tasks.index, dtype=object)
    constrained = allowed.notna().to_numpy()

    # Placement: eligibility classes are the distinct allowed_archs values (class 0: any node).
    codes, class_names = pd.factorize(allowed, use_na_sentinel=True)
    task_class = codes + 1
    host_arch = nodes["arch"].to_numpy()
    class_hosts = np.vstack([np.ones(len(nodes), dtype=bool)] + [np.isin(host_arch, str(c).split("|")) for c in class_names])
    demand = tasks[[f"{d}_request" for d in PLACEMENT_DIMS]].to_numpy(dtype=float)
    capacity = nodes[["cores", "mem", "gpu"]].to_numpy(dtype=float)
    size = demand[:, 0] / capacity[:, 0].max() + demand[:, 1] / capacity[:, 1].max()
    order = np.lexsort((-size, ~constrained, -demand[:, 2]))
    host_of = first_fit_decreasing(demand, capacity, order, task_class, class_hosts)

    dropped: dict[str, str] = {}
    unplaced = host_of < 0
    if unplaced.any():
        arch_capacity = archs[["cores", "mem", "gpu"]].to_numpy(dtype=float)
        class_archs = np.vstack([np.ones(len(archs), dtype=bool)] + [archs.index.isin(str(c).split("|")) for c in class_names])
        sub = np.flatnonzero(unplaced)
        fits = (demand[sub, None, :] <= arch_capacity[None, :, :] + 1e-9).all(axis=2) & class_archs[task_class[sub]]
        alone = fits.any(axis=1)
        reasons = np.where(alone, "no room left on the nodes it may use after first-fit decreasing placed the others", "fits no node (eligible by gpu_spec) even alone")
        dropped = dict(zip(tasks["task_id"].to_numpy()[sub], reasons))
        if not drop_unfit:
            names = list(dropped)
            raise InfeasibleError(
                f"{len(names)} pods got no node ({int((~alone).sum())} fit no eligible node even alone; "
                f"{int(alone.sum())} found no room left): {', '.join(names[:10])}{', ...' if len(names) > 10 else ''}. "
                "Use --drop-unfit to import without them.",
                names,
            )
    placed = ~unplaced
    tasks = tasks[placed].reset_index(drop=True)
    tasks.insert(2, "host_id", nodes["host_id"].to_numpy()[host_of[placed]])
    if constrained.any():
        tasks["allowed_archs"] = allowed[placed].reset_index(drop=True)
    tasks["movable"] = True

    hosts = nodes[["host_id", "arch"]].astype(object)
    write_trace(out, hosts, tasks, None, fleet_toml=_fleet_toml(archs, src, gpu_cost, net_capacity))
    log.info("openb: %d pods on %d nodes (%d architectures) -> %s", len(tasks), len(hosts), len(archs), out)
    return ImportSummary(
        source=src,
        out=out,
        records=records,
        tasks=len(tasks),
        hosts_per_arch=archs["nodes"].astype(int).to_dict(),
        skipped_rows=skipped_rows,
        skipped=tuple(skipped),
        dropped=dropped,
        filtered=filtered,
    )
