"""A small Kubernetes cluster snapshot in the published JSON schemas (kubectl ``-o json``, Prometheus ``query_range``).

Six nodes (a tainted control-plane node, three m5.xlarge in three zones, two
m5.2xlarge) and a few dozen pods: Deployments ``shop/web`` (PDB maxUnavailable 1) and
``api/api`` (init containers), a StatefulSet ``shop/db`` (PDB minAvailable 2), a Job, a
DaemonSet pod per node, a mirror pod, a pod with a hostPath volume, one with an
emptyDir, a bare pod, a pod restricted to m5.2xlarge, and a pending pod.
"""
from __future__ import annotations

import json
from pathlib import Path

WORKERS = ["w-a", "w-b", "w-c", "big-1", "big-2"]
ZONES = {"cp": "zone-a", "w-a": "zone-a", "w-b": "zone-b", "w-c": "zone-c", "big-1": "zone-a", "big-2": "zone-b"}


def node(name: str, instance: str, cpu: str, mem: str, alloc_cpu: str, alloc_mem: str, taints=()) -> dict:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance, "kubernetes.io/arch": "amd64",
                                              "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[name]}},
        "spec": {"taints": list(taints)} if taints else {},
        "status": {"capacity": {"cpu": cpu, "memory": mem, "pods": "110"},
                   "allocatable": {"cpu": alloc_cpu, "memory": alloc_mem, "pods": "110"}},
    }


def pod(ns: str, name: str, node_name: str | None, cpu: str | None, mem: str | None, owner: tuple[str, str] | None = None,
        labels: dict | None = None, phase: str = "Running", **spec_extra) -> dict:
    resources = {"requests": {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}}
    spec = {"containers": [{"name": "main", "image": "example/app:1", "resources": resources}], **spec_extra}
    if node_name is not None:
        spec["nodeName"] = node_name
    meta = {"namespace": ns, "name": name, "uid": f"uid-{ns}-{name}", "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def cluster() -> dict[str, dict]:
    """``{"nodes.json": ..., "pods.json": ..., "pdbs.json": ...}`` as kubectl writes them."""
    nodes = [node("cp", "m5.large", "2", "8Gi", "1930m", "7Gi", [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])]
    nodes += [node(n, "m5.xlarge", "4", "16Gi", "3920m", "15Gi") for n in ("w-a", "w-b", "w-c")]
    nodes += [node(n, "m5.2xlarge", "8", "32Gi", "7910m", "31Gi") for n in ("big-1", "big-2")]

    pods = [pod("kube-system", f"kube-proxy-{n}", n, "100m", "64Mi", ("DaemonSet", "kube-proxy"), {"k8s-app": "kube-proxy"},
                tolerations=[{"operator": "Exists"}]) for n in ["cp", *WORKERS]]
    mirror = pod("kube-system", "kube-apiserver-cp", "cp", "250m", None, ("Node", "cp"), {"component": "kube-apiserver"})
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    pods.append(mirror)
    web_hosts = ["w-a", "w-b", "w-c", "big-1", "big-2", "w-a", "w-b", "big-1"]
    for i, h in enumerate(web_hosts):
        pods.append(pod("shop", f"web-5d8f7c9b6d-{i:05d}", h, "250m", "256Mi", ("ReplicaSet", "web-5d8f7c9b6d"),
                        {"app": "web", "pod-template-hash": "5d8f7c9b6d"}))
    for i, h in enumerate(["w-a", "w-b", "big-2"]):
        pods.append(pod("shop", f"db-{i}", h, "500m", "1Gi", ("StatefulSet", "db"), {"app": "db"}))
    for i, h in enumerate(["w-c", "big-1", "big-2"] * 4):
        p = pod("api", f"api-7f9c-{i:05d}", h, "0.2", "512Mi", ("ReplicaSet", "api-7f9c"), {"app": "api", "pod-template-hash": "7f9c"})
        p["spec"]["initContainers"] = [{"name": "migrate", "image": "x", "resources": {"requests": {"cpu": "300m", "memory": "128Mi"}}}]
        pods.append(p)
    pods.append(pod("batch", "report-28a1-xk2p", "w-c", "1", "1G", ("Job", "report-28a1"), {"job-name": "report-28a1"}))
    pods.append(pod("shop", "logger-66b-q1", "w-b", "100m", "128Mi", ("ReplicaSet", "logger-66b"), {"app": "logger", "pod-template-hash": "66b"},
                    volumes=[{"name": "logs", "hostPath": {"path": "/var/log"}}]))
    pods.append(pod("shop", "cache-77c-z9", "big-2", "100m", "100Mi", ("ReplicaSet", "cache-77c"), {"app": "cache", "pod-template-hash": "77c"},
                    volumes=[{"name": "tmp", "emptyDir": {}}]))
    pods.append(pod("default", "debug", "w-a", "50m", "32Mi"))
    pods.append(pod("ml", "trainer-5c-aa", "big-1", "1500m", "4Gi", ("ReplicaSet", "trainer-5c"), {"app": "trainer", "pod-template-hash": "5c"},
                    nodeSelector={"node.kubernetes.io/instance-type": "m5.2xlarge"}))
    pods.append(pod("shop", "web-5d8f7c9b6d-pend", None, "250m", "256Mi", ("ReplicaSet", "web-5d8f7c9b6d"), {"app": "web"}, phase="Pending"))

    pdbs = [
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"namespace": "shop", "name": "web"},
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"namespace": "shop", "name": "db"},
         "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}},
    ]
    as_list = lambda items: {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}  # noqa: E731
    return {"nodes.json": as_list(nodes), "pods.json": as_list(pods), "pdbs.json": as_list(pdbs)}


def running_task_pods(snapshot: dict[str, dict]) -> list[dict]:
    """The pods the importer should turn into tasks: Running, on a node, not DaemonSet pods."""
    return [p for p in snapshot["pods.json"]["items"] if p["status"]["phase"] == "Running" and p["spec"].get("nodeName")
            and not any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))]


def prometheus(snapshot: dict[str, dict], metric: str, value_of, times=(1700000000, 1700000060, 1700000120)) -> dict:
    """A Prometheus range-query response with one series per task pod (``value_of(pod, t)``)."""
    result = [{"metric": {"namespace": p["metadata"]["namespace"], "pod": p["metadata"]["name"]},
               "values": [[t, str(value_of(p, t))] for t in times]} for p in running_task_pods(snapshot)]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def write_snapshot(folder: Path, snapshot: dict[str, dict] | None = None, usage: bool = True) -> Path:
    """Write the snapshot (and Prometheus usage: 10% of each pod's cpu request, 64 MiB) into ``folder``."""
    snapshot = snapshot or cluster()
    folder.mkdir(parents=True, exist_ok=True)
    for name, doc in snapshot.items():
        (folder / name).write_text(json.dumps(doc, indent=1))
    if usage:
        (folder / "prometheus").mkdir(exist_ok=True)
        cpu = prometheus(snapshot, "cpu", lambda p, t: 0.01 * (1 + t % 7))
        mem = prometheus(snapshot, "mem", lambda p, t: 64 * 2**20)
        (folder / "prometheus" / "container_cpu_usage_seconds_total.json").write_text(json.dumps(cpu))
        (folder / "prometheus" / "container_memory_working_set_bytes.json").write_text(json.dumps(mem))
    return folder
