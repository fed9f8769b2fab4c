"""`packer import kubernetes` and `packer export kubernetes`, through the real CLI, on a small snapshot in kubectl's schemas."""
from __future__ import annotations

import copy
import json
import shutil
import tomllib
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from packer.cli import cli
from packer.io.yaml_text import yaml_documents

from k8s_snapshot import cluster, pod, running_task_pods, write_snapshot


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> dict[str, Path]:
    """Snapshot -> import -> solve (baseline: by requests) -> export, once for the module."""
    root = tmp_path_factory.mktemp("k8s")
    snap, trace, plan, export = root / "snap", root / "trace", root / "plan", root / "export"
    write_snapshot(snap)
    for args in (("import", "kubernetes", snap, "--out", trace), ("validate", trace),
                 ("solve", trace, "--config", "baseline", "--max-moves", "unlimited", "--time-limit", "2", "--deterministic", "--out", plan),
                 ("verify", trace, plan), ("export", "kubernetes", plan, "--out", export)):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
    return {"root": root, "snap": snap, "trace": trace, "plan": plan, "export": export}


def test_import_maps_nodes_pods_owners_and_pins(solved):
    trace = solved["trace"]
    tasks = pd.read_parquet(trace / "tasks.parquet").set_index("task_id")
    hosts = pd.read_parquet(trace / "hosts.parquet").set_index("host_id")
    fleet = tomllib.loads((trace / "fleet.toml").read_text())["arch"]
    snapshot = cluster()
    assert set(tasks.index) == {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in running_task_pods(snapshot)}
    assert "kube-system/kube-proxy-w-a" not in tasks.index and "shop/web-5d8f7c9b6d-pend" not in tasks.index
    assert tasks.loc["shop/web-5d8f7c9b6d-00003", "job_id"] == "shop/Deployment/web"
    assert tasks.loc["shop/db-1", "job_id"] == "shop/StatefulSet/db"
    assert tasks.loc["batch/report-28a1-xk2p", "job_id"] == "batch/Job/report-28a1"
    assert tasks.loc["shop/db-1", "host_id"] == "w-b" and hosts.loc["w-b", "domain"] == "zone-b"
    # api pods: max(containers 0.2, init 300m) cores; 512Mi = 0.5 GiB; memory max(512Mi, 128Mi)
    assert tasks.loc["api/api-7f9c-00000", "cpu_request"] == pytest.approx(0.3)
    assert tasks.loc["api/api-7f9c-00000", "mem_request"] == 0.5
    assert tasks.loc["batch/report-28a1-xk2p", "mem_request"] == pytest.approx(1e9 / 2**30)
    pinned = set(tasks.index[~tasks["movable"]])
    assert pinned == {"kube-system/kube-apiserver-cp", "shop/logger-66b-q1", "default/debug"}
    assert tasks.loc["shop/cache-77c-z9", "movable"]  # an emptyDir does not pin
    assert tasks.loc["ml/trainer-5c-aa", "allowed_archs"] == "m5.2xlarge"
    assert tasks.loc["shop/db-0", "allowed_archs"] == "m5.2xlarge|m5.xlarge"  # the tainted control plane is excluded
    # capacity = allocatable - the DaemonSet pod's requests (100m, 64Mi)
    assert fleet["m5.xlarge"]["cores"] == pytest.approx(3.82) and fleet["m5.xlarge"]["mem"] == pytest.approx(15 - 1 / 16)
    assert fleet["m5.xlarge"]["cost"] == pytest.approx(0.5 * 4 / 32 + 0.5 * 16 / 128)
    assert hosts["arch"].value_counts().to_dict() == {"m5.xlarge": 3, "m5.2xlarge": 2, "m5.large": 1}
    usage = pq.read_table(trace / "usage.parquet").to_pandas()
    assert set(usage["task_id"]) == set(tasks.index) and len(usage) == 3 * len(tasks)
    assert usage["mem"].eq(64 / 1024).all()
    meta = json.loads((trace / "kubernetes.json").read_text())
    assert meta["pods"]["shop/db-0"]["owner_kind"] == "StatefulSet" and meta["pods"]["shop/db-0"]["uid"] == "uid-shop-db-0"
    assert {(p["name"], p["allowed"]) for p in meta["pdbs"]} == {("web", 1), ("db", 1)}


def test_spread_constraints_local_volumes_and_node_selection_are_read(tmp_path):
    snapshot = cluster()
    web = next(p for p in snapshot["pods.json"]["items"] if p["metadata"]["name"] == "web-5d8f7c9b6d-00000")
    web["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                                                 "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}]
    db = next(p for p in snapshot["pods.json"]["items"] if p["metadata"]["name"] == "db-0")
    db["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    api = next(p for p in snapshot["pods.json"]["items"] if p["metadata"]["name"] == "api-7f9c-00000")
    api["spec"]["nodeSelector"] = {"pool": "gone"}  # matches no node, not even its own
    w_a = next(p for p in snapshot["pods.json"]["items"] if p["metadata"]["name"] == "web-5d8f7c9b6d-00005")
    w_a["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}  # part of m5.xlarge (w-a) and of m5.2xlarge (big-1)
    snapshot["pvs.json"] = {"kind": "List", "items": [{"metadata": {"name": "pv-1"}, "spec": {"local": {"path": "/mnt/disk"},
                                                                                          "claimRef": {"namespace": "shop", "name": "data-db-0"}}}]}
    write_snapshot(tmp_path / "snap", snapshot, usage=False)
    assert run("import", "kubernetes", tmp_path / "snap", "--out", tmp_path / "trace").exit_code == 0
    meta = json.loads((tmp_path / "trace" / "kubernetes.json").read_text())
    spread = meta["pods"]["shop/web-5d8f7c9b6d-00000"]["topology_spread"]
    assert spread[0]["label_selector"]["matchLabels"] == {"app": "web", "pod-template-hash": "5d8f7c9b6d"}
    assert meta["pods"]["shop/db-0"]["pinned"] == "local PersistentVolume"
    assert meta["pods"]["api/api-7f9c-00000"]["pinned"] == "node selection matches no node (not even its own)"
    assert meta["pods"]["shop/web-5d8f7c9b6d-00005"]["pinned"] == "node selection allows part of an architecture's nodes"
    assert meta["pods"]["shop/web-5d8f7c9b6d-00004"]["pinned"] is None
    assert not (tmp_path / "trace" / "usage.parquet").exists()


def test_top_files_are_usage(tmp_path):
    snap = write_snapshot(tmp_path / "snap", usage=False)
    (snap / "top").mkdir()
    for t, cpu in ((1700000000, "5m"), (1700000060, "12m")):
        lines = ["NAMESPACE   NAME   CPU(cores)   MEMORY(bytes)"]
        lines += [f"{p['metadata']['namespace']}   {p['metadata']['name']}   {cpu}   100Mi" for p in running_task_pods(cluster())]
        lines.append("kube-system   kube-proxy-w-a   1m   10Mi")  # a DaemonSet pod: not a task
        (snap / "top" / f"{t}.txt").write_text("\n".join(lines) + "\n")
    result = run("import", "kubernetes", snap, "--out", tmp_path / "trace")
    assert result.exit_code == 0, result.output
    usage = pq.read_table(tmp_path / "trace" / "usage.parquet").to_pandas()
    debug = usage[usage["task_id"] == "default/debug"].sort_values("ts")
    assert debug["cpu"].tolist() == pytest.approx([0.005, 0.012]) and debug["mem"].tolist() == pytest.approx([100 / 1024] * 2)
    assert "samples of pods that are not tasks" in result.output


def _break(snapshot: dict, how: str) -> dict:
    snapshot = copy.deepcopy(snapshot)
    pods = snapshot["pods.json"]["items"]
    if how == "quantity":
        pods[7]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12x"
    elif how == "missing":
        del snapshot["nodes.json"]["items"][2]["status"]["allocatable"]["memory"]
    elif how == "operator":
        pods[9]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}
    elif how == "node":
        pods[8]["spec"]["nodeName"] = "ghost"
    return snapshot


@pytest.mark.parametrize("how, names", [
    ("quantity", ["pods.json", "items[7].spec.containers.0.resources.requests.cpu", "12x", "item 7 (shop/web-5d8f7c9b6d-00000)"]),
    ("missing", ["nodes.json", "items[2].status.allocatable.memory", "missing", "item 2 (w-b)"]),
    ("node", ["pods.json", "items[8].spec.nodeName", "ghost"]),
    ("operator", ["pods.json", "items[9]", "unknown selector operator 'Near'", "item 9 (shop/web-5d8f7c9b6d-00002)"]),
    ("json", ["pods.json", "not valid JSON"]),
    ("prometheus", ["container_cpu_usage_seconds_total.json", "data.result[0]", "not a finite number"]),
])
def test_bad_input_names_file_field_and_item_and_writes_nothing(tmp_path, how, names):
    snap = write_snapshot(tmp_path / "snap", _break(cluster(), how))
    if how == "json":
        (snap / "pods.json").write_text((snap / "pods.json").read_text()[:-20])
    if how == "prometheus":
        path = snap / "prometheus" / "container_cpu_usage_seconds_total.json"
        doc = json.loads(path.read_text())
        doc["data"]["result"][0]["values"][1][1] = "NaN"
        path.write_text(json.dumps(doc))
    before = {p: p.read_bytes() for p in snap.rglob("*") if p.is_file()}
    result = CliRunner().invoke(cli, ["import", "kubernetes", str(snap), "--out", str(tmp_path / "trace")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    for name in names:
        assert name in result.output
    assert not (tmp_path / "trace").exists()
    assert before == {p: p.read_bytes() for p in snap.rglob("*") if p.is_file()}


def test_export_writes_moves_in_plan_order_and_manifests_of_the_snapshot(solved):
    export, plan = solved["export"], solved["plan"]
    plan_moves = pd.read_parquet(plan / "moves.parquet").sort_values("step")
    moves = pd.read_csv(export / "moves.csv")
    assert len(plan_moves) > 0
    assert moves["step"].tolist() == plan_moves["step"].tolist()
    assert moves["pod"].tolist() == plan_moves["task_id"].tolist() and moves["to_node"].tolist() == plan_moves["to_host"].tolist()
    assert moves["wave"].is_monotonic_increasing
    docs = list(yaml.safe_load_all((export / "podmigrationjobs.yaml").read_text()))
    snapshot = cluster()
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in snapshot["pods.json"]["items"]}
    nodes = {n["metadata"]["name"] for n in snapshot["nodes.json"]["items"]}
    assert len(docs) == len(moves)
    for doc, move in zip(docs, moves.itertuples()):
        assert doc["apiVersion"] == "scheduling.koordinator.sh/v1alpha1" and doc["kind"] == "PodMigrationJob"
        ref = doc["spec"]["podRef"]
        assert (ref["namespace"], ref["name"]) in pods and f"{ref['namespace']}/{ref['name']}" == move.pod
        assert ref["uid"] == pods[(ref["namespace"], ref["name"])]["metadata"]["uid"]
        assert pods[(ref["namespace"], ref["name"])]["spec"]["nodeName"] == move.from_node
        assert doc["spec"]["mode"] == "ReservationFirst"
        terms = doc["spec"]["reservationOptions"]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [move.to_node]}]}]
        assert move.to_node in nodes and doc["metadata"]["labels"]["packer/wave"] == str(move.wave)
    placement = pd.read_parquet(plan / "placement.parquet")
    freed = sorted({p["spec"]["nodeName"] for p in running_task_pods(snapshot)} - set(placement["host_id"]))
    assert (export / "nodes-to-remove.txt").read_text().split() == freed and freed
    drain = (export / "drain.sh").read_text()
    assert all(f"kubectl drain '{n}'" in drain and f"kubectl cordon '{n}'" in drain for n in freed)
    dry = (export / "dry-run.txt").read_text()
    assert dry.count('"Evicted pod in dry run mode"') == len(moves)
    assert all(f'pod="{m.pod}"' in dry and f'target="{m.to_node}"' in dry for m in moves.itertuples())


def test_no_wave_evicts_more_than_a_pdb_allows(solved):
    moves = pd.read_csv(solved["export"] / "moves.csv")
    labels = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["labels"] for p in running_task_pods(cluster())}
    # web: 8 Running pods, maxUnavailable 1 -> 1; db: 3 pods, minAvailable 2 -> 1
    covered = {"web": {t for t, lab in labels.items() if t.startswith("shop/") and lab.get("app") == "web"},
               "db": {t for t, lab in labels.items() if t.startswith("shop/") and lab.get("app") == "db"}}
    moved_covered = sum(moves["pod"].isin(covered["web"] | covered["db"]))
    assert moved_covered >= 2, "the fixture should make the plan move several PDB-covered pods"
    for wave, group in moves.groupby("wave"):
        for name, members in covered.items():
            assert group["pod"].isin(members).sum() <= 1, (wave, name)


def test_waves_split_on_pdb_budget_and_on_room_freed_in_the_same_wave():
    from packer.plan.export_kubernetes import _waves

    node = {"capacity": {"cpu": "1", "memory": "100"}}
    quarter, half = {"cpu": "0.25", "memory": "10"}, {"cpu": "0.5", "memory": "10"}
    meta = {"nodes": {n: node for n in "abcd"},
            "pods": {"x1": {"node": "a", "requests": quarter}, "x2": {"node": "a", "requests": quarter}, "x3": {"node": "b", "requests": quarter},
                     "y": {"node": "c", "requests": half}, "w": {"node": "c", "requests": half}, "v": {"node": "d", "requests": half}},
            "pdbs": [{"namespace": "ns", "name": "x", "pods": ["x1", "x2", "x3"], "allowed": 2, "expected_pods": 3}]}

    def moves(*rows):
        return pd.DataFrame([(k + 1, t, meta["pods"][t]["node"], dst) for k, (t, dst) in enumerate(rows)],
                            columns=["step", "task_id", "from_host", "to_host"])

    problems = []
    assert _waves(moves(("x1", "b"), ("x2", "b"), ("x3", "a")), meta, problems, "m") == [1, 1, 2]  # the PDB allows 2 at once
    assert _waves(moves(("y", "b"), ("x1", "c")), meta, problems, "m") == [1, 2]  # c has room for x1 only once y has left
    # d holds v (0.5): y fits beside it, w only once v has left (arrivals of a wave add up)
    assert _waves(moves(("v", "a"), ("y", "d"), ("w", "d")), meta, problems, "m") == [1, 1, 2]
    assert not problems
    _waves(moves(("x1", "c")), meta, problems, "m")  # c is full and nothing leaves it
    assert len(problems) == 1 and "no room for it by requests" in problems[0].message
    meta["pdbs"][0]["allowed"] = 0
    _waves(moves(("x1", "b")), meta, problems, "m")
    assert len(problems) == 2 and "allows no eviction" in problems[1].message
    meta["pdbs"].append({"namespace": "ns", "name": "x-again", "pods": ["x2"], "allowed": 5, "expected_pods": 1})
    meta["pdbs"][0]["allowed"] = 2
    _waves(moves(("x2", "b")), meta, problems, "m")
    assert len(problems) == 3 and "several PodDisruptionBudgets cover (ns/x, ns/x-again)" in problems[2].message


def test_export_refuses_a_trace_that_is_not_a_kubernetes_import(solved, tmp_path):
    trace = tmp_path / "trace"
    shutil.copytree(solved["trace"], trace)
    (trace / "kubernetes.json").unlink()
    plan = tmp_path / "plan"
    shutil.copytree(solved["plan"], plan)
    summary = json.loads((plan / "summary.json").read_text())
    summary["context"]["trace"] = str(trace)
    (plan / "summary.json").write_text(json.dumps(summary))
    result = run("export", "kubernetes", plan, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "not a Kubernetes import" in result.output
    assert not (tmp_path / "out").exists()


def test_export_refuses_moves_through_a_temporary_host(solved, tmp_path):
    plan = tmp_path / "plan"
    shutil.copytree(solved["plan"], plan)
    moves = pq.read_table(plan / "moves.parquet")
    table = moves.to_pandas()
    table.loc[0, "via_temporary"] = True
    pq.write_table(type(moves).from_pandas(table, schema=moves.schema, preserve_index=False), plan / "moves.parquet")
    result = run("export", "kubernetes", plan, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "via_temporary" in result.output and "temporary host" in result.output
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_plan_that_requests_do_not_fit(solved, tmp_path):
    """Usage is a few % of requests: a p99 plan packs beyond what the scheduler admits by requests."""
    plan = tmp_path / "plan"
    result = run("solve", solved["trace"], "--config", "p99", "--max-moves", "unlimited", "--time-limit", "2", "--deterministic", "--out", plan)
    assert result.exit_code == 0, result.output
    result = run("export", "kubernetes", plan, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "no room for it by requests" in result.output and "--config baseline" in result.output
    assert not (tmp_path / "out").exists()


def test_spread_violations_name_the_owners():
    from packer.plan.export_kubernetes import _spread_violations

    zone = "topology.kubernetes.io/zone"
    nodes = {n: {"labels": {zone: z}} for n, z in (("h1", "z1"), ("h2", "z1"), ("h3", "z2"), ("h4", "z2"))}
    constraint = [{"max_skew": 1, "topology_key": zone, "when_unsatisfiable": "DoNotSchedule", "label_selector": {"matchLabels": {"app": "x"}}}]
    pods = {"ns/a": {"node": "h1", "namespace": "ns", "labels": {"app": "x"}, "job_id": "ns/Deployment/x", "topology_spread": constraint},
            "ns/b": {"node": "h3", "namespace": "ns", "labels": {"app": "x"}, "job_id": "ns/Deployment/x", "topology_spread": constraint},
            "ns/c": {"node": "h2", "namespace": "ns", "labels": {"app": "other"}, "job_id": "ns/Deployment/other", "topology_spread": []}}
    meta = {"nodes": nodes, "pods": pods}
    final = {"ns/a": "h1", "ns/b": "h1", "ns/c": "h2"}  # both x pods in z1, z2 (h4) left empty: skew 2
    problems = _spread_violations(meta, final, {"ns/b"}, {"h3"}, "m")
    assert len(problems) == 1 and "ns/Deployment/x" in problems[0].message and "skew 0 before the plan, 2 after" in problems[0].message
    constraint[0]["when_unsatisfiable"] = "ScheduleAnyway"
    assert _spread_violations(meta, final, {"ns/b"}, {"h3"}, "m") == []


def test_yaml_writer_round_trips_tricky_strings():
    doc = {"a": "no", "b": ["1e3", "null", "", 'quote " and \\ and \n newline', "ü"], "c": {}, "d": [], "e": {"f": [{"g": True, "h": 3}], "i": 1.5},
           "key: with colon": [["x", "y"], {"k": "v"}]}
    text = yaml_documents([doc, {"x": "y"}], ["first", "second"])
    assert list(yaml.safe_load_all(text)) == [doc, {"x": "y"}]


def test_bare_owner_names_survive_without_template_hash():
    from packer.io.k8s_objects import workload_of

    p = pod("ns", "rs-abc-1", "n", "1", "1", ("ReplicaSet", "rs-abc"), {"app": "x"})
    assert workload_of(p) == ("ReplicaSet", "rs-abc")
    p["metadata"]["labels"]["pod-template-hash"] = "abc"
    assert workload_of(p) == ("Deployment", "rs")


def test_help_documents_the_snapshot_layout():
    text = run("import", "kubernetes", "--help").output
    for name in ("nodes.json", "pods.json", "pdbs.json", "prometheus/container_cpu_usage_seconds_total.json", "top/<unix seconds>.txt",
                 "rate(container_cpu_usage_seconds_total"):
        assert name in text
    assert "podmigrationjobs.yaml" in run("export", "kubernetes", "--help").output


def test_pdb_counts_follow_the_snapshot(tmp_path):
    snapshot = cluster()
    snapshot["pdbs.json"]["items"][0]["spec"] = {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "web"}}}
    snapshot["pdbs.json"]["items"][1]["spec"] = {"minAvailable": "34%", "selector": {"matchLabels": {"app": "db"}}}
    write_snapshot(tmp_path / "snap", snapshot, usage=False)
    assert run("import", "kubernetes", tmp_path / "snap", "--out", tmp_path / "trace").exit_code == 0
    pdbs = {p["name"]: p for p in json.loads((tmp_path / "trace" / "kubernetes.json").read_text())["pdbs"]}
    assert pdbs["web"]["allowed"] == 4  # ceil(50% of 8) = 4 unavailable
    assert pdbs["db"]["allowed"] == 1  # ceil(34% of 3) = 2 must stay of 3
    assert Counter(len(p["pods"]) for p in pdbs.values()) == Counter({8: 1, 3: 1})


def test_node_selection_reads_selectors_affinity_taints_and_cordons():
    from packer.io.k8s_objects import node_selection_matches, tolerates

    def node_obj(name, labels, taints=(), cordoned=False):
        return {"metadata": {"name": name, "labels": labels}, "spec": {"taints": list(taints), "unschedulable": cordoned}}

    gpu = node_obj("g1", {"pool": "gpu", "rank": "7"}, [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    plain = node_obj("p1", {"pool": "cpu", "rank": "2"}, [{"key": "soft", "effect": "PreferNoSchedule"}])
    cordoned = node_obj("c1", {"pool": "cpu"}, cordoned=True)

    def spec(**kw):
        return {"spec": kw}

    def affinity(*terms):
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}

    assert node_selection_matches(spec(), plain) and not node_selection_matches(spec(), gpu) and not node_selection_matches(spec(), cordoned)
    tolerant = [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    assert node_selection_matches(spec(tolerations=tolerant), gpu)
    assert not node_selection_matches(spec(tolerations=[{"key": "gpu", "value": "no"}]), gpu)
    assert node_selection_matches(spec(tolerations=[{"operator": "Exists"}]), gpu)
    assert not node_selection_matches(spec(nodeSelector={"pool": "gpu"}), plain)
    assert node_selection_matches(spec(affinity=affinity({"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["5"]}]}),
                                       tolerations=tolerant), gpu)
    assert not node_selection_matches(spec(affinity=affinity({"matchExpressions": [{"key": "rank", "operator": "Lt", "values": ["2"]}]})), plain)
    either = affinity({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]},
                      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["p1"]}]})
    assert node_selection_matches(spec(affinity=either), plain)  # terms are ORed
    assert not node_selection_matches(spec(affinity=affinity({"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]})), plain)
    assert not node_selection_matches(spec(affinity=affinity({})), plain)  # an empty term matches no node
    assert tolerates({"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"})
    assert not tolerates({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"})


def test_pod_requests_count_sidecars_init_containers_and_overhead():
    from fractions import Fraction

    from packer.io.k8s_objects import pod_requests

    p = pod("ns", "p", "n", "100m", "100Mi", ("ReplicaSet", "r"))
    p["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m", "memory": "10Mi"}}},
        {"name": "init", "resources": {"requests": {"cpu": "1", "memory": "1Mi"}}},
    ]
    p["spec"]["overhead"] = {"cpu": "10m"}
    assert pod_requests(p) == {"cpu": Fraction(1) + Fraction(50, 1000) + Fraction(10, 1000), "memory": Fraction(110 * 2**20)}
