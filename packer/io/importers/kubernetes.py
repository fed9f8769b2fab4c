"""Import a Kubernetes cluster snapshot (kubectl JSON, optional usage) as a native trace.

Snapshot folder (``SRC``):

* ``nodes.json`` — ``kubectl get nodes -o json``;
* ``pods.json`` — ``kubectl get pods -A -o json``;
* ``pdbs.json`` (optional) — ``kubectl get pdb -A -o json``: PodDisruptionBudgets, used by
  ``packer export kubernetes`` to group moves;
* ``pvs.json`` (optional) — ``kubectl get pv -o json``: pods whose claims are bound to a
  ``local`` PersistentVolume are pinned;
* usage (optional): ``prometheus/*.json`` and/or ``top/*.txt``
  (:mod:`packer.io.importers.kubernetes_usage`). Without usage the trace is requests-only.

Mapping:

* **hosts** = nodes (``host_id`` = node name, ``domain`` = label
  ``topology.kubernetes.io/zone``). A node's capacity is its ``status.allocatable`` cpu
  and memory minus the requests of the DaemonSet pods on it: DaemonSet pods run on
  every node they select, so they are not tasks (they go away with a removed node and
  never move) but the room they take is not available to tasks.
* **architectures** (the trace's own ``fleet.toml``): one per instance type (label
  ``node.kubernetes.io/instance-type``, or the node's shape ``cpu<cores>-mem<GiB>``
  without one), split where nodes of one type differ in capacity, hard taints or
  cordoning (``name-2``, ``name-3``, ...). ``cores`` and ``mem`` (GiB) are the capacity
  above; ``score`` = cores / 32 (every core counts alike, as a Broadwell18 core of
  ``models/fleet.toml``); ``net`` a nominal 25 Gbps (pods request 0: not read);
  ``type`` = the node's ``kubernetes.io/arch`` label; **cost (an assumption: the
  snapshot has no prices)** = 0.5 x capacity cores / 32 + 0.5 x capacity GiB / 128 from
  ``status.capacity``: a 32-core, 128 GiB node costs 1.0, half of it for cores and half
  for memory. Edit ``fleet.toml`` to use real prices.
* **tasks** = pods in phase ``Running`` with ``spec.nodeName`` (other pods are counted
  and left out): ``task_id`` = ``namespace/name``, ``host_id`` = the node, ``job_id`` =
  ``namespace/Kind/name`` of the pod's workload (a ReplicaSet's Deployment where its
  ``pod-template-hash`` shows it, else the controlling owner; a pod without owner is its
  own job). Requests: the scheduler's effective request (containers and sidecars summed,
  the largest init container if more, plus ``spec.overhead``), parsed exactly; cpu in
  cores, mem in GiB (bytes / 2**30); ``net_request`` 0.
* **pinned** (``movable`` false): mirror/static pods (annotation
  ``kubernetes.io/config.mirror`` or owner kind ``Node``), pods with a ``hostPath`` volume
  or a claim bound to a ``local`` PersistentVolume (``pvs.json``), pods without an owner
  (evicting one deletes it), pods annotated
  ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, and pods whose node
  selection (``nodeSelector``, required node affinity, taints they do not tolerate)
  allows part of an architecture's nodes but not all (eligibility is per architecture).
  ``emptyDir`` volumes do not pin: their data is scratch space, recreated empty on the
  new node (as ``kubectl drain --delete-emptydir-data`` assumes).
* **allowed_archs**: the architectures of the nodes a pod's node selection allows,
  when that is not every node.

Not read: extended resources (GPUs), ephemeral storage, the node's pod limit, limits,
preferred and inter-pod affinity, ``PreferNoSchedule`` taints, network.

``kubernetes.json`` (written beside the tables) keeps what ``packer export kubernetes``
needs: per node its labels and capacity, per task pod its namespace, name, uid, owner,
labels, tolerations, exact requests and ``topologySpreadConstraints``, and the
PodDisruptionBudgets with the pods they cover and the evictions they allow.
"""
from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field as dc_field
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pyarrow as pa

from packer.errors import InputError, Problem
from packer.io.atomic import refuse_to_overwrite_input
from packer.io.importers.cluster_trace import fleet_toml
from packer.io.importers.kubernetes_usage import has_usage, read_usage
from packer.io.importers.summary import ImportSummary
from packer.io.k8s_objects import (INSTANCE_TYPE_LABELS, METADATA_FILE, METADATA_FORMAT, MIRROR_ANNOTATION,
                                   SAFE_TO_EVICT_ANNOTATION, ZONE_LABEL, controller_of, field, hard_taints, labels_of,
                                   match_label_selector, node_selection_matches, pod_requests, quantity_at,
                                   workload_of)
from packer.io.k8s_quantity import BYTES_PER_GIB, decimal_text
from packer.io.trace import read_json_object, write_trace

log = logging.getLogger(__name__)

NODES_FILE = "nodes.json"
PODS_FILE = "pods.json"
PDBS_FILE = "pdbs.json"
PVS_FILE = "pvs.json"
#: Cores per 1.0 of throughput score: Broadwell18 (32 cores, score 1.0) in models/fleet.toml.
CORES_PER_SCORE = 32
#: Cost assumption: a node of 32 cores and 128 GiB costs 1.0, half for cores, half for memory.
COST_CORES, COST_GIB = 32, 128
NET_CAPACITY = 25.0
USAGE_SCHEMA = pa.schema([("task_id", pa.string()), ("ts", pa.timestamp("s", tz="UTC")), ("cpu", pa.float64()),
                          ("mem", pa.float64()), ("net", pa.float64())])


@dataclass(frozen=True)
class KubernetesImport:
    """An import's counts (``summary``), pinned pods by reason, pods left out by reason, and usage left out."""

    summary: ImportSummary
    pinned: dict[str, int] = dc_field(default_factory=dict)
    left_out: dict[str, int] = dc_field(default_factory=dict)
    usage_left_out: dict[str, int] = dc_field(default_factory=dict)


def _items(path: Path, problems: list[Problem], kind: str) -> list[dict]:
    """The ``items`` of a ``kubectl get ... -o json`` list."""
    doc = read_json_object(path)
    items = doc.get("items")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        problems.append(Problem(str(path), "items", f"expected a list of {kind} objects (the output of `kubectl get {kind} -o json`)", 0))
        return []
    return items


def _where(i: int, obj: dict) -> tuple[str]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = "/".join(str(meta[k]) for k in ("namespace", "name") if k in meta)
    return (f"item {i} ({name or 'no name'})",)


def _located(file: str, i: int, obj: dict, exc: ValueError) -> Problem:
    """A problem of one object: the field path (from the message) as the column, the item as the row."""
    text = str(exc)
    if not text.startswith("field '"):
        return Problem(file, f"items[{i}]", text, 1, _where(i, obj))
    column, message = text[len("field '"):].split("'", 1)
    return Problem(file, f"items[{i}].{column}", message.lstrip(": ").strip(), 1, _where(i, obj))


@dataclass
class _Node:
    name: str
    labels: dict
    cpu: Fraction  # allocatable cores
    mem: Fraction  # allocatable bytes
    cap_cpu: Fraction
    cap_mem: Fraction
    taints: tuple
    unschedulable: bool
    raw: dict
    ds_cpu: Fraction = Fraction(0)
    ds_mem: Fraction = Fraction(0)


def _read_nodes(path: Path, problems: list[Problem]) -> dict[str, _Node]:
    file = str(path)
    nodes: dict[str, _Node] = {}
    for i, obj in enumerate(_items(path, problems, "nodes")):
        try:
            name = field(obj, "metadata.name", str)
            cpu = quantity_at(obj, "status.allocatable.cpu")
            mem = quantity_at(obj, "status.allocatable.memory")
            cap_cpu = quantity_at(obj, "status.capacity.cpu", cpu)
            cap_mem = quantity_at(obj, "status.capacity.memory", mem)
            labels = labels_of(obj)
            taints = tuple(sorted((t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in hard_taints(obj)))
            unschedulable = field(obj, "spec.unschedulable", bool, False)
        except ValueError as exc:
            problems.append(_located(file, i, obj, exc))
            continue
        if name in nodes:
            problems.append(Problem(file, f"items[{i}].metadata.name", "duplicate node name", 1, _where(i, obj)))
        elif cpu <= 0 or mem < 0:
            problems.append(Problem(file, f"items[{i}].status.allocatable", "a node needs allocatable cpu > 0 and memory >= 0", 1, _where(i, obj)))
        else:
            nodes[name] = _Node(name, labels, cpu, mem, cap_cpu, cap_mem, taints, unschedulable, obj)
    if not nodes and not problems:
        problems.append(Problem(file, "items", "no nodes", 0))
    return nodes


def _local_claims(path: Path, problems: list[Problem]) -> set[tuple[str, str]]:
    """(namespace, claim name) of every claim bound to a ``local`` PersistentVolume."""
    out = set()
    for i, pv in enumerate(_items(path, problems, "pv")):
        try:
            if field(pv, "spec.local", dict, None) is not None and field(pv, "spec.claimRef", dict, None) is not None:
                out.add((field(pv, "spec.claimRef.namespace", str), field(pv, "spec.claimRef.name", str)))
        except ValueError as exc:
            problems.append(_located(str(path), i, pv, exc))
    return out


def _pin_reason(pod: dict, namespace: str, local_claims: set[tuple[str, str]]) -> str | None:
    """Why a pod must stay where it is, or None."""
    annotations = field(pod, "metadata.annotations", dict, {})
    owner = controller_of(pod)
    if MIRROR_ANNOTATION in annotations or (owner is not None and owner[0] == "Node"):
        return "mirror (static) pod"
    if str(annotations.get(SAFE_TO_EVICT_ANNOTATION, "")).lower() == "false":
        return f"annotated {SAFE_TO_EVICT_ANNOTATION}: false"
    for volume in field(pod, "spec.volumes", list, []):
        if "hostPath" in volume:
            return "hostPath volume"
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and (namespace, claim.get("claimName")) in local_claims:
            return "local PersistentVolume"
    if owner is None:
        return "no owner (evicting deletes it)"
    return None


def _eligible_nodes(pod: dict, nodes: dict[str, _Node], cache: dict[str, frozenset[str]]) -> frozenset[str]:
    """The nodes the pod's node selection allows; ``cache`` holds one answer per distinct selection (a workload's pods share it)."""
    spec = field(pod, "spec", dict)
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), dict) else {}
    key = json.dumps([spec.get("nodeSelector"), affinity.get("nodeAffinity"), spec.get("tolerations")], sort_keys=True)
    if key not in cache:
        cache[key] = frozenset(n for n, node in nodes.items() if node_selection_matches(pod, node.raw))
    return cache[key]


def _spread_constraints(pod: dict) -> list[dict]:
    """``topologySpreadConstraints`` with ``matchLabelKeys`` folded into the selector (as the scheduler does)."""
    out = []
    labels = labels_of(pod)
    for c in field(pod, "spec.topologySpreadConstraints", list, []):
        selector = json.loads(json.dumps(field(c, "labelSelector", dict, None))) if c.get("labelSelector") is not None else None
        keys = field(c, "matchLabelKeys", list, [])
        if selector is not None and keys:
            selector.setdefault("matchLabels", {}).update({k: labels[k] for k in keys if k in labels})
        out.append({"max_skew": field(c, "maxSkew", int), "topology_key": field(c, "topologyKey", str),
                    "when_unsatisfiable": field(c, "whenUnsatisfiable", str), "label_selector": selector})
    return out


def _arch_names(nodes: dict[str, _Node]) -> dict[str, str]:
    """Node name -> architecture name: one per instance type, split by capacity, taints and cordoning."""
    def base(node: _Node) -> str:
        kind = next((node.labels[k] for k in INSTANCE_TYPE_LABELS if node.labels.get(k)), None)
        if kind is None:
            kind = f"cpu{float(node.cpu - node.ds_cpu):g}-mem{float(node.mem - node.ds_mem) / BYTES_PER_GIB:g}"
        return "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in kind)

    def key(node: _Node) -> tuple:
        return (node.cpu - node.ds_cpu, node.mem - node.ds_mem, node.cap_cpu, node.cap_mem, node.taints, node.unschedulable,
                node.labels.get("kubernetes.io/arch", "node"))

    groups: dict[str, Counter] = {}
    for node in nodes.values():
        groups.setdefault(base(node), Counter())[key(node)] += 1
    names: dict[tuple, str] = {}
    for b, keys in groups.items():
        for n, (k, _) in enumerate(sorted(keys.items(), key=lambda kv: (-kv[1], repr(kv[0])))):
            names[(b, k)] = b if n == 0 else f"{b}-{n + 1}"
    return {name: names[(base(node), key(node))] for name, node in nodes.items()}


def _fleet_toml(archs: pd.DataFrame, src: Path) -> str:
    header = [
        "Fleet of a Kubernetes cluster, written by `packer import kubernetes` from",
        f"{src.resolve()}.",
        "One architecture per instance type (split where nodes differ in capacity, taints or cordoning);",
        "the comment after each name counts its nodes.",
        "cores, mem (GiB): allocatable minus the DaemonSet pods' requests; net: nominal (not read).",
        "score = cores / 32: every core counts as a Broadwell18 core.",
        f"cost (assumed, the snapshot has no prices) = 0.5 x capacity cores / {COST_CORES} + 0.5 x capacity GiB / {COST_GIB}.",
        "Edit to use real prices.",
    ]
    return fleet_toml(header, archs.rename(columns={"nodes": "hosts"}))


def _pdbs(path: Path, pods: dict[str, dict], problems: list[Problem]) -> list[dict]:
    """PodDisruptionBudgets with the task pods they cover and the evictions they allow at once.

    Allowed = healthy - desired healthy, where healthy counts the covered Running pods
    of the snapshot, and desired healthy is ``minAvailable``, or the expected pods minus
    ``maxUnavailable`` (percentages of the expected pods rounded up, as the disruption
    controller does; expected = ``status.expectedPods`` when present, else the covered pods).
    """
    out = []
    for i, pdb in enumerate(_items(path, problems, "pdb")):
        try:
            ns, name = field(pdb, "metadata.namespace", str), field(pdb, "metadata.name", str)
            selector = field(pdb, "spec.selector", dict, None)
            members = sorted(t for t, p in pods.items() if p["namespace"] == ns and match_label_selector(selector, p["labels"]))
            expected = field(pdb, "status.expectedPods", int, len(members))
            spec = field(pdb, "spec", dict)
            if ("minAvailable" in spec) == ("maxUnavailable" in spec):
                raise ValueError("field 'spec': expected exactly one of minAvailable and maxUnavailable")
            key = "minAvailable" if "minAvailable" in spec else "maxUnavailable"
            value = _scaled(spec[key], expected, f"spec.{key}")
            desired = value if key == "minAvailable" else expected - value
        except ValueError as exc:
            problems.append(_located(str(path), i, pdb, exc))
            continue
        out.append({"namespace": ns, "name": name, _PDB_KEYS[key]: spec[key],
                    "expected_pods": expected, "pods": members, "allowed": max(0, len(members) - desired)})
    return out


_PDB_KEYS = {"minAvailable": "min_available", "maxUnavailable": "max_unavailable"}


def _scaled(value, total: int, path: str) -> int:
    """An int-or-percent (``2``, ``"25%"``) against ``total``, percentages rounded up."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return math.ceil(int(value[:-1]) * total / 100)
    raise ValueError(f"field '{path}': expected a count >= 0 or a percentage like \"25%\", got {value!r}")


def import_kubernetes(src: str | Path, out: str | Path) -> KubernetesImport:
    """Convert a snapshot folder into a native trace at ``out`` (see the module docstring for layout and mapping).

    Units written: cores, GiB, Gbps (net 0). Raises :class:`InputError` naming file,
    field and object for any malformed input; nothing is written then.
    """
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise InputError([Problem(str(src), "", f"snapshot folder not found (expected {NODES_FILE} and {PODS_FILE})", 0)])
    refuse_to_overwrite_input(out, src)
    problems: list[Problem] = []
    nodes = _read_nodes(src / NODES_FILE, problems)
    pod_items = _items(src / PODS_FILE, problems, "pods")
    local_claims = _local_claims(src / PVS_FILE, problems) if (src / PVS_FILE).exists() else set()

    pods: dict[str, dict] = {}
    eligible: dict[str, frozenset[str]] = {}
    selections: dict[str, frozenset[str]] = {}
    pinned: Counter = Counter()
    left_out: Counter = Counter()
    pods_file = str(src / PODS_FILE)
    for i, obj in enumerate(pod_items):
        try:
            ns, name = field(obj, "metadata.namespace", str), field(obj, "metadata.name", str)
            node = field(obj, "spec.nodeName", str, None)
            if field(obj, "status.phase", str, "") != "Running" or node is None:
                left_out["not Running on a node"] += 1
                continue
            requests = pod_requests(obj)
            if node not in nodes:
                # A node that failed to parse is already reported; its pods would only repeat it.
                if not any(p.file == str(src / NODES_FILE) for p in problems):
                    problems.append(Problem(pods_file, f"items[{i}].spec.nodeName", f"node {node!r} is not in {NODES_FILE}", 1, _where(i, obj)))
                continue
            owner = controller_of(obj)
            if owner is not None and owner[0] == "DaemonSet":
                nodes[node].ds_cpu += requests["cpu"]
                nodes[node].ds_mem += requests["memory"]
                left_out["DaemonSet pods (their requests reduce the node's capacity)"] += 1
                continue
            kind, workload = workload_of(obj)
            task = f"{ns}/{name}"
            if task in pods:
                problems.append(Problem(pods_file, f"items[{i}].metadata.name", "duplicate pod", 1, _where(i, obj)))
                continue
            pods[task] = {
                "namespace": ns, "name": name, "uid": field(obj, "metadata.uid", str, ""), "node": node,
                "owner_kind": kind, "owner": workload, "job_id": f"{ns}/{kind}/{workload}",
                "labels": labels_of(obj), "tolerations": field(obj, "spec.tolerations", list, []),
                "requests": {"cpu": decimal_text(requests["cpu"]), "memory": decimal_text(requests["memory"])},
                "pinned": _pin_reason(obj, ns, local_claims), "topology_spread": _spread_constraints(obj),
            }
            eligible[task] = _eligible_nodes(obj, nodes, selections)
        except ValueError as exc:
            problems.append(_located(pods_file, i, obj, exc))
    for node in nodes.values():
        if node.cpu - node.ds_cpu <= 0 or node.mem - node.ds_mem < 0:
            problems.append(Problem(str(src / NODES_FILE), "status.allocatable", "DaemonSet pods request all of the node's allocatable cpu or memory",
                                    1, (node.name,)))
    if not pods and not problems:
        problems.append(Problem(pods_file, "items", "no Running pod with a node (other than DaemonSet pods)", 0))
    pdbs = _pdbs(src / PDBS_FILE, pods, problems) if (src / PDBS_FILE).exists() else []
    usage = read_usage(src, set(pods), problems) if has_usage(src) else None
    if usage is not None and usage.rows.empty and not problems:
        problems.append(Problem(str(src), "", "the usage files hold no sample (with both cpu and memory) of any imported pod", 0))
    if problems:
        raise InputError(problems)

    arch_of = _arch_names(nodes)
    hosts = pd.DataFrame({"host_id": list(nodes), "arch": [arch_of[n] for n in nodes],
                          "domain": [nodes[n].labels.get(ZONE_LABEL) for n in nodes]}).astype(object)
    if hosts["domain"].isna().all():
        hosts = hosts.drop(columns="domain")
    archs = pd.DataFrame([{
        "arch": arch_of[n.name], "type": n.labels.get("kubernetes.io/arch", "node"),
        "cores": float(n.cpu - n.ds_cpu), "mem": float(n.mem - n.ds_mem) / BYTES_PER_GIB, "net": NET_CAPACITY,
        "score": float(n.cpu - n.ds_cpu) / CORES_PER_SCORE,
        "cost": 0.5 * float(n.cap_cpu) / COST_CORES + 0.5 * float(n.cap_mem) / BYTES_PER_GIB / COST_GIB,
    } for n in nodes.values()])
    archs = archs.groupby("arch", sort=True).agg(type=("type", "first"), cores=("cores", "first"), mem=("mem", "first"),
                                                 net=("net", "first"), score=("score", "first"), cost=("cost", "first"),
                                                 nodes=("cores", "size"))

    allowed: dict[str, str | None] = {}
    for task, may_use in eligible.items():
        arch_set = {arch_of[n] for n in may_use}
        if not may_use:
            pods[task]["pinned"] = pods[task]["pinned"] or "node selection matches no node (not even its own)"
        elif may_use != {n for n in nodes if arch_of[n] in arch_set}:
            pods[task]["pinned"] = pods[task]["pinned"] or "node selection allows part of an architecture's nodes"
        allowed[task] = None if len(may_use) == len(nodes) or not arch_set else "|".join(sorted(arch_set))
    for p in pods.values():
        if p["pinned"]:
            pinned[p["pinned"]] += 1

    ids = list(pods)
    tasks = pd.DataFrame({
        "task_id": ids, "job_id": [pods[t]["job_id"] for t in ids], "host_id": [pods[t]["node"] for t in ids],
        "cpu_request": [float(Fraction(pods[t]["requests"]["cpu"])) for t in ids],
        "mem_request": [float(Fraction(pods[t]["requests"]["memory"])) / BYTES_PER_GIB for t in ids],
        "net_request": 0.0, "movable": [not pods[t]["pinned"] for t in ids],
    })
    if any(v is not None for v in allowed.values()):
        tasks["allowed_archs"] = pd.Series([allowed[t] for t in ids], dtype=object)
    metadata = {
        "format": METADATA_FORMAT, "source": str(src.resolve()),
        "nodes": {n: {"arch": arch_of[n], "labels": node.labels, "capacity": {"cpu": decimal_text(node.cpu - node.ds_cpu),
                                                                                "memory": decimal_text(node.mem - node.ds_mem)}}
                  for n, node in nodes.items()},
        "pods": pods, "pdbs": pdbs,
    }
    batches = None
    usage_left: dict[str, int] = {}
    if usage is not None:
        usage_left = {"samples of pods that are not tasks (pods)": usage.other_pods,
                      "times with only one of cpu and memory (samples)": usage.incomplete}
        rows = usage.rows
        batches = [pa.Table.from_arrays([pa.array(rows["task_id"], pa.string()), pa.array(rows["ts"].to_numpy(), pa.timestamp("s", tz="UTC")),
                                         pa.array(rows["cpu"], pa.float64()), pa.array(rows["mem"], pa.float64()),
                                         pa.array(rows["net"], pa.float64())], schema=USAGE_SCHEMA)]
    write_trace(out, hosts, tasks, batches, fleet_toml=_fleet_toml(archs, src),
                side_files={METADATA_FILE: json.dumps(metadata, indent=1, sort_keys=True) + "\n"})
    log.info("kubernetes: %d pods on %d nodes (%d architectures) -> %s", len(tasks), len(hosts), len(archs), out)
    summary = ImportSummary(source=src, out=out, records=len(pod_items), tasks=len(tasks),
                            hosts_per_arch=archs["nodes"].astype(int).to_dict(), usage_rows=0 if usage is None else len(usage.rows))
    return KubernetesImport(summary=summary, pinned=dict(pinned), left_out=dict(left_out), usage_left_out=usage_left)
