"""Kubernetes in and out: ``packer import kubernetes`` (a cluster snapshot into a trace) and ``packer export kubernetes``."""
from __future__ import annotations

import time
from pathlib import Path

import click

from packer.cli.output import echo_import, echo_kubernetes_export, echo_kubernetes_import
from packer.io.importers.kubernetes import import_kubernetes
from packer.io.output_check import check_output_writable
from packer.plan.export_kubernetes import export_kubernetes


@click.command("kubernetes", short_help="Import a Kubernetes cluster snapshot (kubectl JSON, optional usage).")
@click.argument("src", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Output trace folder (written atomically).")
def import_kubernetes_cmd(src: Path, out: Path) -> None:
    """Import a Kubernetes cluster snapshot taken with kubectl (and optionally Prometheus).

    \b
    SRC is a folder with:
      nodes.json   kubectl get nodes -o json
      pods.json    kubectl get pods -A -o json
      pdbs.json    (optional) kubectl get pdb -A -o json
      pvs.json     (optional) kubectl get pv -o json  (pods on local PVs are pinned)
      prometheus/container_cpu_usage_seconds_total.json and
      prometheus/container_memory_working_set_bytes.json
                   (optional) Prometheus range-query responses (/api/v1/query_range) of
                   sum by (namespace,pod) (rate(container_cpu_usage_seconds_total{container!=""}[1m]))
                   sum by (namespace,pod) (container_memory_working_set_bytes{container!=""})
      top/<unix seconds>.txt
                   (optional) one `kubectl top pods -A` output per file, named by its time

    \b
    Nodes become hosts (allocatable minus DaemonSet requests; zone label -> domain),
    one architecture per instance type in the trace's fleet.toml (cost assumed:
    0.5 x cores/32 + 0.5 x GiB/128; edit it). Running pods become tasks (task_id
    namespace/name, job_id namespace/Kind/workload, requests in cores and GiB);
    mirror pods, pods with hostPath or local PV volumes, pods without owner and
    pods annotated safe-to-evict=false are pinned; DaemonSet pods are not tasks.
    kubernetes.json keeps what `packer export kubernetes` needs. See the README.
    """
    check_output_writable(out)
    start = time.perf_counter()
    result = import_kubernetes(src, out)
    echo_import(result.summary, "pods", time.perf_counter() - start)
    echo_kubernetes_import(result)


@click.group("export", short_help="Turn a plan into what a cluster applies (Kubernetes).")
def export_group() -> None:
    """Turn a plan folder into artefacts a cluster operator applies (see `packer export COMMAND --help`)."""


@export_group.command("kubernetes", short_help="Pod moves, Koordinator PodMigrationJobs, a dry run and nodes to drain.")
@click.argument("plan", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Output folder (written atomically).")
def export_kubernetes_cmd(plan: Path, out: Path) -> None:
    """Export a plan of a `packer import kubernetes` trace for the cluster.

    \b
    Reads PLAN (from `packer solve`) and the trace its summary.json records, and writes:
      moves.csv, moves.md     per move: wave, step, pod, owner, from-node, to-node
      podmigrationjobs.yaml   Koordinator PodMigrationJobs (ReservationFirst, reservation
                              pinned to the target node), one per move, in order
      apply-koordinator.sh    cordon the nodes to remove, apply the jobs wave by wave
      dry-run.txt             descheduler-style dry run: where every evicted pod lands
      nodes-to-remove.txt     nodes the plan empties
      drain.sh                kubectl cordon / drain for them (clusters without Koordinator)
    Waves never evict more pods than a PodDisruptionBudget allows, and never need room
    that a move of the same wave frees. Refused (exit 2, nothing written): a trace that
    is not a Kubernetes import, moves through a temporary host, moves that do not fit
    by requests (solve with --config baseline), a PDB that allows no eviction, and a
    final placement that breaks a DoNotSchedule topologySpreadConstraint.
    """
    check_output_writable(out)
    echo_kubernetes_export(export_kubernetes(plan, out))
