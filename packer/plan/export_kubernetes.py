"""Turn a plan of a Kubernetes import into what a cluster operator applies.

``export_kubernetes(PLAN, OUT)`` reads a plan folder written by ``packer solve``, the
trace it records (``summary.json``'s ``context.trace``) and that trace's
``kubernetes.json`` (a trace not imported by ``packer import kubernetes`` is refused),
and writes into ``OUT`` (atomically):

* ``moves.csv`` / ``moves.md``: per move its wave, the plan's step, the pod
  (``namespace/name``), its owner, the source and target node and what the move buys;
* ``podmigrationjobs.yaml``: one Koordinator ``PodMigrationJob``
  (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped) per move in step order, mode
  ``ReservationFirst``; the reservation template reserves the pod's requests on the
  target node (required node affinity on ``metadata.name``) with the pod's
  tolerations; labels ``packer/plan`` and ``packer/wave`` select a wave;
* ``apply-koordinator.sh``: cordons the nodes to remove, then applies the jobs wave by
  wave, waiting for each wave's jobs to succeed;
* ``dry-run.txt``: for clusters without Koordinator, a report in the style of the
  descheduler's dry run (``"Evicted pod in dry run mode"``) naming where every evicted
  pod lands;
* ``nodes-to-remove.txt`` (one node a line) and ``drain.sh`` (``kubectl cordon`` then
  ``kubectl drain`` per node): the nodes that hold task pods today and none after the plan.

Waves: moves are grouped, in the plan's order, into waves that may run at once. A
wave closes before a move that would (a) evict more pods covered by one
PodDisruptionBudget than it allows (``allowed`` in ``kubernetes.json``: computed at
import from ``minAvailable``/``maxUnavailable`` and the covered pods), or (b) need room
on its target that only a departure of the same wave frees. Room is counted by requests
against each node's capacity for tasks (allocatable minus DaemonSet requests), exactly
(quantities as fractions): the Kubernetes scheduler admits pods by requests.

Refused, with every reason listed (:class:`InputError`, nothing written): a move
through a temporary host (Kubernetes cannot park a pod and move it again: its
replacement has another name); a move whose target lacks room by requests even after
every earlier wave (a plan packed by usage, e.g. ``--config p99``, that requests do not
fit: solve with ``--config baseline``); a move of a pod whose PodDisruptionBudget
allows no eviction, or that several budgets cover (the Eviction API refuses it); a final placement that breaks a pod's ``topologySpreadConstraints``
with ``whenUnsatisfiable: DoNotSchedule`` (the skew over the topology's domains, nodes
to remove left out, exceeds ``maxSkew`` and is worse than before; ``ScheduleAnyway``
constraints are preferences and not checked; domains are all nodes with the key, not
only those the pod's node selection allows).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pandas as pd

from packer.errors import InputError, Problem
from packer.io.atomic import atomic_dir, refuse_to_overwrite_input
from packer.io.k8s_objects import match_label_selector, read_snapshot_metadata
from packer.io.yaml_text import yaml_documents
from packer.plan.plan import read_plan
from packer.report.markdown import markdown_table

API_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "PodMigrationJob"
RESOURCES = ("cpu", "memory")
EXPORT_COLUMNS = ("wave", "step", "pod", "owner_kind", "owner", "from_node", "to_node", "buys")
#: How long apply-koordinator.sh waits for one wave's jobs.
WAVE_TIMEOUT = "30m"


@dataclass(frozen=True)
class KubernetesExport:
    """What an export wrote: the moves (:data:`EXPORT_COLUMNS`, step order), the waves and the nodes to remove."""

    out: Path
    moves: pd.DataFrame
    waves: int
    nodes_to_remove: tuple[str, ...]
    plan_id: str


def _requests(pod: dict) -> dict[str, Fraction]:
    return {r: Fraction(pod["requests"][r]) for r in RESOURCES}


def _waves(moves: pd.DataFrame, meta: dict, problems: list[Problem], source: str) -> list[int]:
    """Wave number (1..) per move, in step order; refusals are appended to ``problems``."""
    pods, nodes = meta["pods"], meta["nodes"]
    capacity = {n: {r: Fraction(v["capacity"][r]) for r in RESOURCES} for n, v in nodes.items()}
    load = {n: {r: Fraction(0) for r in RESOURCES} for n in nodes}
    for pod in pods.values():
        for r, v in _requests(pod).items():
            load[pod["node"]][r] += v
    covering: dict[str, list[int]] = {}
    for k, pdb in enumerate(meta["pdbs"]):
        for pod in pdb["pods"]:
            covering.setdefault(pod, []).append(k)

    wave, out, current = 1, [], []
    arriving: dict[str, Counter] = {}
    evicting: Counter = Counter()

    def room(node: str, req: dict[str, Fraction], with_arrivals: bool) -> bool:
        extra = arriving.get(node, Counter()) if with_arrivals else Counter()
        return all(load[node][r] + extra[r] + req[r] <= capacity[node][r] for r in RESOURCES)

    for m in moves.itertuples():
        req = _requests(pods[m.task_id])
        blocked = [meta["pdbs"][k] for k in covering.get(m.task_id, []) if meta["pdbs"][k]["allowed"] < 1]
        if len(covering.get(m.task_id, [])) > 1:
            names = ", ".join(f"{meta['pdbs'][k]['namespace']}/{meta['pdbs'][k]['name']}" for k in covering[m.task_id])
            problems.append(Problem(source, "", f"step {m.step} moves {m.task_id}, which several PodDisruptionBudgets cover ({names}): "
                                                "the Eviction API refuses to evict such a pod", 0))
        for pdb in blocked:
            problems.append(Problem(source, "", f"step {m.step} moves {m.task_id}, but PodDisruptionBudget {pdb['namespace']}/{pdb['name']} "
                                                f"allows no eviction ({len(pdb['pods'])} pods covered, {pdb['expected_pods']} expected)", 0))
        budget_full = any(evicting[k] + 1 > meta["pdbs"][k]["allowed"] for k in covering.get(m.task_id, []))
        if current and (budget_full or not room(m.to_host, req, True)):
            for t, src, dst in current:
                for r, v in _requests(pods[t]).items():
                    load[src][r] -= v
                    load[dst][r] += v
            wave, current, arriving, evicting = wave + 1, [], {}, Counter()
        if not room(m.to_host, req, False):
            need = ", ".join(f"{r} {float(load[m.to_host][r] + req[r]):g} of {float(capacity[m.to_host][r]):g}" for r in RESOURCES)
            problems.append(Problem(source, "", f"step {m.step} moves {m.task_id} to {m.to_host}, which has no room for it by requests "
                                                f"({need}; cpu in cores, memory in bytes): the plan was not packed by requests; "
                                                "solve with --config baseline", 0))
        current.append((m.task_id, m.from_host, m.to_host))
        arriving.setdefault(m.to_host, Counter()).update(req)
        evicting.update(covering.get(m.task_id, []))
        out.append(wave)
    return out


def _skew(counts: dict[str, int]) -> int:
    return max(counts.values()) - min(counts.values()) if counts else 0


def _spread_violations(meta: dict, final: dict[str, str], moved: set[str], removed: set[str], source: str) -> list[Problem]:
    """Owners whose hard topology spread gets worse than ``maxSkew`` allows in the final placement."""
    pods, nodes = meta["pods"], meta["nodes"]
    constraints: dict[tuple, set[str]] = {}
    for task in moved:
        pod = pods[task]
        for c in pod.get("topology_spread", []):
            if c["when_unsatisfiable"] == "DoNotSchedule":
                key = (pod["namespace"], c["topology_key"], json.dumps(c["label_selector"], sort_keys=True), c["max_skew"])
                constraints.setdefault(key, set()).add(pod["job_id"])
    problems = []
    for (ns, topology_key, selector_text, max_skew), owners in sorted(constraints.items()):
        selector = json.loads(selector_text)
        members = [t for t, p in pods.items() if p["namespace"] == ns and match_label_selector(selector, p["labels"])]
        skews = []
        for placement, excluded in (({t: pods[t]["node"] for t in members}, set()), ({t: final[t] for t in members}, removed)):
            counts = {v["labels"][topology_key]: 0 for n, v in nodes.items() if topology_key in v["labels"] and n not in excluded}
            for node in placement.values():
                domain = nodes[node]["labels"].get(topology_key)
                if domain in counts:
                    counts[domain] += 1
            skews.append(_skew(counts))
        before, after = skews
        if after > max_skew and after > before:
            problems.append(Problem(source, "", f"topologySpreadConstraints of {', '.join(sorted(owners))} (topologyKey {topology_key}, "
                                                f"maxSkew {max_skew}, DoNotSchedule): skew {before} before the plan, {after} after; "
                                                "solve with --spread-domain/--spread-host limits, or pin these pods", 0))
    return problems


def _migration_job(move, pod: dict, wave: int, plan_id: str) -> dict:
    """One PodMigrationJob: migrate the pod to ``move.to_host`` through a reservation pinned to that node."""
    pod_ref = {"apiVersion": "v1", "kind": "Pod", "namespace": pod["namespace"], "name": pod["name"]}
    if pod.get("uid"):
        pod_ref["uid"] = pod["uid"]
    pinned_to_target = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [move.to_host]}]}]}
    template_spec = {
        "containers": [{"name": "reserve", "resources": {"requests": dict(pod["requests"])}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pinned_to_target}},
    }
    if pod.get("tolerations"):
        template_spec["tolerations"] = pod["tolerations"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": f"packer-{plan_id}-{int(move.step):05d}",
            "labels": {"packer/plan": plan_id, "packer/wave": str(wave)},
            "annotations": {"packer/step": str(int(move.step)), "packer/from-node": move.from_host, "packer/to-node": move.to_host,
                            "packer/owner": f"{pod['owner_kind']}/{pod['namespace']}/{pod['owner']}"},
        },
        "spec": {
            "mode": "ReservationFirst",
            "podRef": pod_ref,
            "reservationOptions": {"template": {"spec": {"template": {"spec": template_spec}}}},
        },
    }


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _apply_script(plan_id: str, waves: int, removed: list[str]) -> str:
    lines = ["#!/bin/sh", f"# Applies the PodMigrationJobs of packer plan {plan_id} one wave at a time (Koordinator's koord-descheduler",
             "# runs them). Nodes to remove are cordoned first, so that no pod lands there.", "set -e"]
    lines += [f"kubectl cordon {_sh_quote(n)}" for n in removed]
    for w in range(1, waves + 1):
        selector = f"packer/plan={plan_id},packer/wave={w}"
        lines += [f"kubectl apply -f podmigrationjobs.yaml -l {selector}",
                  f"kubectl wait podmigrationjob -l {selector} --for=jsonpath='{{.status.phase}}'=Succeeded --timeout={WAVE_TIMEOUT}"]
    lines.append("# Then remove the emptied nodes (see nodes-to-remove.txt), e.g. by scaling down their node group.")
    return "\n".join(lines) + "\n"


def _drain_script(removed: list[str]) -> str:
    lines = ["#!/bin/sh", "# Nodes the plan frees: cordon all first (nothing new lands there), then drain one at a time.",
             "# kubectl drain evicts through the Eviction API, so PodDisruptionBudgets are respected; without Koordinator",
             "# the scheduler picks where evicted pods land (dry-run.txt shows where the plan puts them).", "set -e"]
    lines += [f"kubectl cordon {_sh_quote(n)}" for n in removed]
    lines += [f"kubectl drain {_sh_quote(n)} --ignore-daemonsets --delete-emptydir-data --timeout={WAVE_TIMEOUT}" for n in removed]
    return "\n".join(lines) + "\n"


def _dry_run(table: pd.DataFrame, plan: Path, trace: Path, removed: list[str]) -> str:
    lines = [f"# packer dry run of plan {plan} (trace {trace}): nothing was changed.",
             "# One line per evicted pod in the descheduler's dry-run format, with the node the plan lands it on (target)",
             "# and its wave (moves of one wave may run at once; start a wave when the previous one has finished)."]
    for m in table.itertuples():
        lines.append(f'"Evicted pod in dry run mode" pod={json.dumps(m.pod)} owner={json.dumps(f"{m.owner_kind}/{m.owner}")} '
                     f'node={json.dumps(m.from_node)} target={json.dumps(m.to_node)} step={m.step} wave={m.wave} reason={json.dumps(m.buys)}')
    lines.append(f'"Total number of pods evicted" evictedPods={len(table)} waves={int(table["wave"].max()) if len(table) else 0} '
                 f'nodesToRemove={len(removed)}')
    return "\n".join(lines) + "\n"


def _moves_markdown(table: pd.DataFrame, plan: Path, removed: list[str]) -> str:
    waves = int(table["wave"].max()) if len(table) else 0
    lines = [f"# Kubernetes moves of plan {plan.name}", "",
             f"{len(table):,} pod moves in {waves} waves; {len(removed)} nodes to remove: {', '.join(removed) or 'none'}.",
             "Moves of one wave may run at once; start a wave when every move of the previous one has finished.", "",
             markdown_table(list(EXPORT_COLUMNS), table[list(EXPORT_COLUMNS)].values.tolist(), "rr" + "l" * 6, str), ""]
    return "\n".join(lines)


def export_kubernetes(plan_path: str | Path, out: str | Path) -> KubernetesExport:
    """Write the Kubernetes artefacts of the plan folder ``plan_path`` into ``out`` (see the module docstring).

    Raises :class:`InputError` (exit 2, nothing written) when the plan or its trace cannot
    be read, the trace is not a Kubernetes import, or the plan cannot be applied as is.
    """
    plan_path, out = Path(plan_path), Path(out)
    plan = read_plan(plan_path)
    trace = Path(plan.context.trace)
    refuse_to_overwrite_input(out, plan_path)
    refuse_to_overwrite_input(out, trace)
    meta = read_snapshot_metadata(trace)
    source = str(plan_path / "moves.parquet")
    moves = plan.moves.sort_values("step", kind="stable").reset_index(drop=True)
    pods, nodes = meta["pods"], meta["nodes"]

    unknown = sorted(set(moves["task_id"]) - set(pods)) + sorted((set(moves["from_host"]) | set(moves["to_host"])) - set(nodes))
    unknown += sorted(set(plan.placement["task_id"]) - set(pods)) + sorted(set(plan.placement["host_id"]) - set(nodes))
    if unknown:
        raise InputError([Problem(source, "", f"the plan names pods or nodes that {trace}/kubernetes.json does not have "
                                              f"(was the trace re-imported?): {', '.join(unknown[:10])}", len(unknown))])
    problems = []
    temporary = moves[moves["via_temporary"].astype(bool)]
    if len(temporary):
        problems.append(Problem(source, "via_temporary", "moves through a temporary host cannot be applied in Kubernetes (the pod's replacement "
                                                         "has another name, so it cannot be moved again); solve again (another --seed, or fewer "
                                                         "--max-moves) for a plan without them", len(temporary),
                                tuple(f"step {s} ({t})" for s, t in zip(temporary["step"][:5], temporary["task_id"][:5]))))

    final = dict(zip(plan.placement["task_id"], plan.placement["host_id"]))
    before_hosts = {p["node"] for p in pods.values()}
    removed = sorted(before_hosts - set(final.values()))
    problems += _spread_violations(meta, final, set(moves["task_id"]), set(removed), source)
    waves = _waves(moves, meta, problems, source)
    if problems:
        raise InputError(problems)

    buys = dict(zip(plan.listing["step"], plan.listing["buys"])) if plan.listing is not None and "buys" in plan.listing else {}
    table = pd.DataFrame({
        "wave": waves, "step": moves["step"].astype(int).to_numpy(), "pod": moves["task_id"].to_numpy(),
        "owner_kind": [pods[t]["owner_kind"] for t in moves["task_id"]], "owner": [f"{pods[t]['namespace']}/{pods[t]['owner']}" for t in moves["task_id"]],
        "from_node": moves["from_host"].to_numpy(), "to_node": moves["to_host"].to_numpy(),
        "buys": [str(buys.get(s, "")) for s in moves["step"]],
    }, columns=list(EXPORT_COLUMNS))
    plan_id = hashlib.sha256(f"{plan.summary.get('created_utc')}|{trace.resolve()}|{plan_path.resolve()}".encode()).hexdigest()[:8]
    jobs = [_migration_job(m, pods[m.task_id], w, plan_id) for m, w in zip(moves.itertuples(), waves)]
    comments = [f"step {m.step}, wave {w}: {m.task_id} {m.from_host} -> {m.to_host}" for m, w in zip(moves.itertuples(), waves)]
    n_waves = max(waves, default=0)

    with atomic_dir(out) as tmp:
        buffer = io.StringIO()
        table.to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
        (tmp / "moves.csv").write_text(buffer.getvalue())
        (tmp / "moves.md").write_text(_moves_markdown(table, plan_path, removed))
        (tmp / "podmigrationjobs.yaml").write_text(yaml_documents(jobs, comments) if jobs else "")
        (tmp / "apply-koordinator.sh").write_text(_apply_script(plan_id, n_waves, removed))
        (tmp / "dry-run.txt").write_text(_dry_run(table, plan_path, trace, removed))
        (tmp / "nodes-to-remove.txt").write_text("".join(f"{n}\n" for n in removed))
        (tmp / "drain.sh").write_text(_drain_script(removed))
    return KubernetesExport(out=out, moves=table, waves=n_waves, nodes_to_remove=tuple(removed), plan_id=plan_id)
