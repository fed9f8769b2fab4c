"""Kubernetes objects as the scheduler reads them: label selectors, node selection, taints, owners, requests.

Shared by the importer (:mod:`packer.io.importers.kubernetes`) and the exporter
(:mod:`packer.plan.export_kubernetes`), which meet in the trace's side file
``kubernetes.json`` (:func:`read_snapshot_metadata`). Every function takes the plain
JSON dicts of ``kubectl get ... -o json``; a malformed field raises ``ValueError``
with the field's path, which the caller turns into an :class:`~packer.errors.InputError`
naming the file and the object.
"""
from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from packer.errors import InputError, Problem
from packer.io.k8s_quantity import parse_quantity
from packer.io.trace import read_json_object

METADATA_FILE = "kubernetes.json"
METADATA_FORMAT = "packer-kubernetes/1"
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
ZONE_LABEL = "topology.kubernetes.io/zone"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
#: Taint effects that keep a pod off a node it does not tolerate (PreferNoSchedule is a preference).
HARD_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def field(obj: Any, path: str, kind: type | tuple[type, ...] = dict, default: Any = ...) -> Any:
    """``obj`` at the dotted ``path`` (keys may not contain dots), checked to be of ``kind``.

    A missing key returns ``default`` when one is given, else raises ``ValueError``; a
    value of the wrong kind always raises ``ValueError`` naming the path.
    """
    value = obj
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value or value[key] is None:
            if default is ...:
                raise ValueError(f"field '{path}' missing")
            return default
        value = value[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"field '{path}': expected {names}, got {type(value).__name__}")
    return value


def labels_of(obj: dict) -> dict[str, str]:
    return field(obj, "metadata.labels", dict, {})


def match_label_selector(selector: dict | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` match a ``metav1.LabelSelector`` (``matchLabels`` and ``matchExpressions``, ANDed).

    An empty selector matches everything; ``None`` (no selector) matches nothing, as in a PDB or spread constraint.
    """
    if selector is None:
        return False
    for key, value in field(selector, "matchLabels", dict, {}).items():
        if labels.get(key) != value:
            return False
    for expr in field(selector, "matchExpressions", list, []):
        if not _match_expression(expr, labels.get(field(expr, "key", str)), key_present=field(expr, "key", str) in labels):
            return False
    return True


def _match_expression(expr: dict, value: str | None, key_present: bool) -> bool:
    """One ``matchExpressions`` item (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``) against one label value."""
    op = field(expr, "operator", str)
    values = field(expr, "values", list, [])
    if op == "In":
        return key_present and value in values
    if op == "NotIn":
        return not key_present or value not in values
    if op == "Exists":
        return key_present
    if op == "DoesNotExist":
        return not key_present
    if op in ("Gt", "Lt"):
        if not key_present or len(values) != 1 or not re.fullmatch(r"-?\d+", str(value)):
            return False
        return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
    raise ValueError(f"unknown selector operator {op!r} (expected In, NotIn, Exists, DoesNotExist, Gt or Lt)")


def node_selection_matches(pod: dict, node: dict) -> bool:
    """Whether the scheduler may put ``pod`` on ``node`` by labels and taints.

    Reads ``spec.nodeSelector``, required node affinity (terms ORed; within a term
    ``matchExpressions`` on labels and ``matchFields`` on ``metadata.name`` ANDed) and the
    node's ``NoSchedule``/``NoExecute`` taints against the pod's tolerations. A cordoned node
    (``spec.unschedulable``) takes no new pod. Preferred affinity, inter-pod affinity and
    ``PreferNoSchedule`` taints are preferences or depend on other pods, and are not read.
    """
    labels = labels_of(node)
    name = field(node, "metadata.name", str)
    for key, value in field(pod, "spec.nodeSelector", dict, {}).items():
        if labels.get(key) != value:
            return False
    terms = field(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", list, None)
    if terms is not None and not any(_term_matches(term, labels, name) for term in terms):
        return False
    if field(node, "spec.unschedulable", bool, False):
        return False
    tolerations = field(pod, "spec.tolerations", list, [])
    if not all(isinstance(t, dict) for t in tolerations):
        raise ValueError("field 'spec.tolerations': expected a list of objects")
    return all(any(tolerates(t, taint) for t in tolerations) for taint in hard_taints(node))


def _term_matches(term: dict, labels: dict[str, str], name: str) -> bool:
    expressions = field(term, "matchExpressions", list, [])
    fields = field(term, "matchFields", list, [])
    if not expressions and not fields:
        return False  # an empty term matches no node
    if not all(_match_expression(e, labels.get(field(e, "key", str)), field(e, "key", str) in labels) for e in expressions):
        return False
    return all(field(f, "key", str) == "metadata.name" and _match_expression(f, name, True) for f in fields)


def hard_taints(node: dict) -> list[dict]:
    """The node's taints that keep untolerating pods off (``NoSchedule``, ``NoExecute``)."""
    return [t for t in field(node, "spec.taints", list, []) if t.get("effect") in HARD_TAINT_EFFECTS]


def tolerates(toleration: dict, taint: dict) -> bool:
    """Whether one toleration tolerates one taint (Kubernetes' ``Toleration.ToleratesTaint``)."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration.get("key") != taint.get("key"):
        return False
    return operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or "")


def quantity_at(obj: dict, path: str, default: Fraction | None = None) -> Fraction:
    """The quantity at the dotted ``path`` of ``obj`` (``default`` when missing and one is given); errors name the path."""
    value = field(obj, path, (str, int, float), None if default is not None else ...)
    if value is None:
        return default
    try:
        return parse_quantity(value)
    except ValueError as exc:
        raise ValueError(f"field '{path}': {exc}") from None


def pod_requests(pod: dict) -> dict[str, Fraction]:
    """The pod's effective ``cpu`` (cores) and ``memory`` (bytes) requests, as the scheduler computes them.

    Per resource: the sum over ``spec.containers`` (plus restartable init containers, i.e.
    sidecars with ``restartPolicy: Always``), or the largest plain init container (plus
    the sidecars declared before it) if that is more, plus ``spec.overhead``. A container
    without a request requests 0.
    """
    containers = [(f"spec.containers.{i}", c) for i, c in enumerate(field(pod, "spec.containers", list))]
    init = [(f"spec.initContainers.{i}", c) for i, c in enumerate(field(pod, "spec.initContainers", list, []))]
    out = {}
    for resource in ("cpu", "memory"):
        def request(where: str, container: dict) -> Fraction:
            try:
                return quantity_at(container, f"resources.requests.{resource}", Fraction(0))
            except ValueError as exc:
                raise ValueError(str(exc).replace("field '", f"field '{where}.", 1)) from None

        total = sum((request(w, c) for w, c in containers + [(w, c) for w, c in init if c.get("restartPolicy") == "Always"]), Fraction(0))
        peak, running = Fraction(0), Fraction(0)
        for where, c in init:
            if c.get("restartPolicy") == "Always":
                running += request(where, c)
            else:
                peak = max(peak, running + request(where, c))
        out[resource] = max(total, peak) + quantity_at(pod, f"spec.overhead.{resource}", Fraction(0))
        if out[resource] < 0:
            raise ValueError(f"field 'spec.containers': negative {resource} request")
    return out


def controller_of(pod: dict) -> tuple[str, str] | None:
    """``(kind, name)`` of the pod's managing controller (``ownerReferences`` with ``controller: true``, else the first), or None."""
    owners = field(pod, "metadata.ownerReferences", list, [])
    chosen = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    if chosen is None:
        return None
    return field(chosen, "kind", str), field(chosen, "name", str)


def workload_of(pod: dict) -> tuple[str, str]:
    """``(kind, name)`` of the workload a pod belongs to: a ReplicaSet's Deployment where its name shows it, else the controller.

    A ReplicaSet made by a Deployment is named ``<deployment>-<pod-template-hash>``, and
    the pod carries that hash as its ``pod-template-hash`` label; a ReplicaSet that is not
    named so stays a ReplicaSet. A pod without owners is its own workload (``Pod``).
    """
    owner = controller_of(pod)
    if owner is None:
        return "Pod", field(pod, "metadata.name", str)
    kind, name = owner
    template_hash = labels_of(pod).get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith("-" + template_hash):
        return "Deployment", name[: -len(template_hash) - 1]
    return kind, name


def read_snapshot_metadata(trace: Path) -> dict:
    """The ``kubernetes.json`` an import wrote into ``trace``; a trace without one raises :class:`InputError`."""
    path = Path(trace) / METADATA_FILE
    if not path.exists():
        raise InputError([Problem(str(trace), "", f"not a Kubernetes import: the trace has no {METADATA_FILE} "
                                                  "(import the cluster with `packer import kubernetes`)", 0)])
    doc = read_json_object(path)
    if doc.get("format") != METADATA_FORMAT:
        raise InputError([Problem(str(path), "format", f"expected {METADATA_FORMAT!r}, got {doc.get('format')!r}", 0)])
    for key in ("nodes", "pods", "pdbs"):
        if not isinstance(doc.get(key), (dict, list)):
            raise InputError([Problem(str(path), key, "missing or not a JSON object/list", 0)])
    return doc
