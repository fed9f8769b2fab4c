"""Translate CPU demand and sensitivity scores between server architectures.

Two conversions, both from the fleet catalog (see ARCHITECTURE.md, "Units"):

CPU demand. A task using ``c`` cores on architecture A needs
``c · (score_A/cores_A) / (score_B/cores_B)`` cores on B: per-core throughput
(``score/cores``) is what a core is worth. The architecture-independent form is
*compute units* (CU): ``cores · score_A/cores_A``, i.e. fractions of a whole host
of score 1.0 (the paper's scores are normalized to Broadwell18, so one Broadwell18
core is 1/32 CU). A whole host of architecture A holds ``score_A`` CU. For
readability :func:`to_reference_cores` expresses CU as cores of the fleet's
reference architecture (the one with score 1.0).

Sensitivity (colocation paper, Eq. 1). A score ``s`` measured on architecture M
becomes ``s_k(A) = s · g_k(M) / g_k(A)`` on A, with ``g_cpu = score`` (throughput)
and, for every other dimension (memory and network bandwidth), ``g_k =
capacity_k / cores`` (per-core bandwidth): :func:`eq1_factor`.

What a score is a fraction of: the *basis* (:data:`SENSITIVITY_BASES`).

* ``need`` (the default). Section III-C: "'One' represents 100% of the particular
  resource dimension needs ... the application should be guaranteed this fraction
  of the shared resource". A task holds a share of its host, ``CU_t / score_A``
  (its requested compute units over the host's; Eq. 1 normalizes bandwidths per
  core, so the same share is its share of memory and network bandwidth), and must
  be guaranteed ``s_k(A)`` of that share. The paper's soft constraint
  ``Σ_t Sensitivity(t, h) ≤ 1`` reads ``Σ_t s_t,k(A) · CU_t / score_A ≤ 1``, i.e.
  the linear ``Σ_t s_t,k · g_k(M_t) · CU_t ≤ g_k(A) · score_A``. ``CU_t`` is the
  task's *requested* CPU in compute units: the paper measures a score as the share
  of the requested allocation below which the SLO degrades (Section V-B, Fig. 5:
  "at 93% of requested CPU allocation"), and a request does not depend on the
  configuration, so every configuration is judged against one yardstick.
* ``host``: the literal whole-host reading, ``Σ_t s_t,k(A) ≤ 1``, i.e.
  ``Σ_t s_t,k · g_k(M_t) ≤ g_k(A)``. With Table III's scores (0.6-0.96 even on the
  largest host) any two scored tasks on one host exceed 1.

Either way sensitivity is one more resource dimension with task demand
:func:`sensitivity_demand` and host capacity :func:`sensitivity_capacity`, and the
host's summed normalized sensitivity is demand over capacity. A task whose own
demand exceeds a host's capacity (``s_k(A) · CU_t / score_A > 1``, or
``s_k(A) > 1`` on the host basis) would break the limit alone, so that
architecture is ineligible for it: larger, more sensitive tasks cannot use the
smaller hosts (Section III-C: "these smaller hosts won't be able to accommodate
such services").

An architecture whose catalog entry lacks a dimension's capacity (NaN) leaves
that dimension unchecked on it (normalized score NaN, no ineligibility); a
capacity of 0 makes every task with a positive score ineligible there.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from packer.errors import InputError
from packer.io.fleet import Fleet

log = logging.getLogger(__name__)

#: Sensitivity dimensions of the colocation paper (Table III): CPU, memory bandwidth, network bandwidth.
SENSITIVITY_DIMS = ("cpu", "membw", "net")
#: What a score is a fraction of (module doc): the task's own requested need, or the whole host.
SENSITIVITY_BASES = ("need", "host")
DEFAULT_SENSITIVITY_BASIS = "need"
#: Normalized sensitivity above this (plus a rounding tolerance) makes an architecture ineligible.
ELIGIBLE_MAX = 1.0
_TOLERANCE = 1e-9


def _arch_positions(fleet: Fleet, archs) -> np.ndarray:
    """Row positions of architecture names in ``fleet.archs``; unknown names raise InputError."""
    names = pd.Index(fleet.archs.index)
    pos = names.get_indexer(pd.Index(np.asarray(archs, dtype=object)))
    if (pos < 0).any():
        unknown = sorted(set(np.asarray(archs, dtype=object)[pos < 0].astype(str)))
        raise InputError(f"architecture(s) {', '.join(unknown)} missing from the fleet catalog {fleet.source} (known: {', '.join(names)})")
    return pos


def per_core_throughput(fleet: Fleet) -> np.ndarray:
    """``score / cores`` per architecture in ``fleet.archs`` order (compute units per core)."""
    return (fleet.archs["score"] / fleet.archs["cores"]).to_numpy(dtype=float)


def reference_arch(fleet: Fleet) -> str:
    """The architecture scores are normalized to: the one with score 1.0, else the lowest-scoring one."""
    scores = fleet.archs["score"]
    exact = scores.index[np.isclose(scores.to_numpy(dtype=float), 1.0)]
    return str(exact[0]) if len(exact) else str(scores.idxmin())


def translate_cpu(cores, from_arch, to_arch, fleet: Fleet) -> np.ndarray:
    """Cores needed on ``to_arch`` for ``cores`` used on ``from_arch`` (arrays broadcast elementwise)."""
    tput = per_core_throughput(fleet)
    return np.asarray(cores, dtype=float) * tput[_arch_positions(fleet, np.atleast_1d(from_arch))] / tput[_arch_positions(fleet, np.atleast_1d(to_arch))]


def translate_cpu_matrix(cores, from_arch, fleet: Fleet) -> np.ndarray:
    """Cores needed on every architecture: a (tasks × archs) array, columns in ``fleet.archs`` order."""
    tput = per_core_throughput(fleet)
    cu = np.asarray(cores, dtype=float) * tput[_arch_positions(fleet, from_arch)]
    return cu[:, None] / tput[None, :]


def to_compute_units(cores, arch, fleet: Fleet) -> np.ndarray:
    """Compute units (``cores · score/cores`` of the architecture the cores are on)."""
    return np.asarray(cores, dtype=float) * per_core_throughput(fleet)[_arch_positions(fleet, np.atleast_1d(arch))]


def to_reference_cores(compute_units, fleet: Fleet) -> np.ndarray:
    """Compute units as cores of :func:`reference_arch` (Broadwell18 for the paper's catalog)."""
    ref = fleet.archs.loc[reference_arch(fleet)]
    return np.asarray(compute_units, dtype=float) * (ref["cores"] / ref["score"])


def eq1_factor(fleet: Fleet, dim: str) -> pd.Series:
    """``g_k(A)`` of Eq. 1 per architecture: ``score`` for CPU, ``capacity/cores`` (Gbps per core) otherwise.

    NaN where the catalog gives the architecture no capacity in ``dim``.
    """
    archs = fleet.archs
    if dim == "cpu":
        return archs["score"].astype(float).rename("cpu")
    if dim not in archs.columns:
        return pd.Series(np.nan, index=archs.index, name=dim)
    return (archs[dim].astype(float) / archs["cores"].astype(float)).rename(dim)


def check_basis(basis: str) -> str:
    """``basis`` if it is one of :data:`SENSITIVITY_BASES`, else :class:`InputError`."""
    if basis not in SENSITIVITY_BASES:
        raise InputError(f"unknown sensitivity basis '{basis}'; known: {', '.join(SENSITIVITY_BASES)}")
    return basis


def sensitivity_capacity(fleet: Fleet, dim: str, basis: str = DEFAULT_SENSITIVITY_BASIS) -> pd.Series:
    """Per-host sensitivity capacity per architecture: ``g_k(A) · score_A`` (``need``) or ``g_k(A)`` (``host``)."""
    g = eq1_factor(fleet, dim)
    return g if check_basis(basis) == "host" else (g * fleet.archs["score"].astype(float)).rename(dim)


def sensitivity_demand(scores, measured_on, fleet: Fleet, dim: str, basis: str = DEFAULT_SENSITIVITY_BASIS,
                       need_cu=None) -> np.ndarray:
    """Each task's use of :func:`sensitivity_capacity`: ``s · g_k(M) · CU`` (``need``) or ``s · g_k(M)`` (``host``).

    ``need_cu``: the task's requested compute units (required on the ``need``
    basis). NaN scores (unscored tasks) give NaN demand; callers treat it as 0.
    """
    g = eq1_factor(fleet, dim).to_numpy()
    s = np.asarray(scores, dtype=float)
    known = ~np.isnan(s)
    out = np.full(s.shape, np.nan)
    out[known] = s[known] * g[_arch_positions(fleet, np.asarray(measured_on, dtype=object)[known])]
    if check_basis(basis) == "need":
        if need_cu is None:
            raise ValueError("the need basis needs each task's requested compute units")
        out = out * np.asarray(need_cu, dtype=float)
    return out


def host_share(need_cu, fleet: Fleet) -> np.ndarray:
    """(tasks × archs) each task's share of a whole host of each architecture: ``CU_t / score_A``."""
    return np.asarray(need_cu, dtype=float)[:, None] / fleet.archs["score"].to_numpy(dtype=float)[None, :]


def translate_sensitivity(scores, dim: str, from_arch, to_arch, fleet: Fleet) -> np.ndarray:
    """Eq. 1 elementwise: scores measured on ``from_arch`` expressed on ``to_arch``."""
    g = eq1_factor(fleet, dim).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(scores, dtype=float) * g[_arch_positions(fleet, np.atleast_1d(from_arch))] / g[_arch_positions(fleet, np.atleast_1d(to_arch))]


@dataclass(frozen=True)
class NormalizedSensitivity:
    """Eq. 1 sensitivity of every task on every architecture (dimensionless fractions of what the basis measures).

    ``values[dim]`` is a (tasks × archs) array, columns in ``archs`` order; NaN for
    unscored tasks and for architectures with no capacity in ``dim``.
    """

    archs: tuple[str, ...]
    values: dict[str, np.ndarray]

    def eligibility(self, share: np.ndarray | None = None, limit: float = ELIGIBLE_MAX) -> np.ndarray:
        """(tasks × archs) bool: False where a task alone exceeds ``limit`` in some dimension.

        ``share`` (tasks × archs, :func:`host_share`): on the ``need`` basis the task
        holds that share of a host and the test is ``s_k(A) · share > limit``; None
        (the ``host`` basis) tests ``s_k(A) > limit``.
        """
        scale = 1.0 if share is None else share
        over = [np.nan_to_num(v * scale, nan=0.0) > limit + _TOLERANCE for v in self.values.values()]
        if not over:
            raise ValueError("no sensitivity dimensions")
        return ~np.logical_or.reduce(over)

    def frame(self, dim: str) -> pd.DataFrame:
        """One dimension as a DataFrame with architecture columns (for reports)."""
        return pd.DataFrame(self.values[dim], columns=list(self.archs))


def normalize_scores(scores: pd.DataFrame, fleet: Fleet, dims: tuple[str, ...] = SENSITIVITY_DIMS) -> NormalizedSensitivity:
    """Eq. 1 for all tasks and architectures at once.

    ``scores`` has one row per task with a score column per dimension in ``dims``
    (measured on ``measured_on``, an architecture name; NaN scores allowed).
    """
    measured_on = scores["measured_on"].to_numpy(dtype=object)
    known = scores[list(dims)].notna().any(axis=1).to_numpy()
    pos = np.zeros(len(scores), dtype=np.int64)
    pos[known] = _arch_positions(fleet, measured_on[known])
    values = {}
    for dim in dims:
        g = eq1_factor(fleet, dim).to_numpy()
        missing = np.isnan(g)
        if missing.any():
            log.warning("fleet %s gives no %s capacity for %s; %s sensitivity is not checked there",
                        fleet.source, dim, ", ".join(fleet.archs.index[missing]), dim)
        s = scores[dim].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            # 0/0 (a zero score on a zero-capacity architecture) needs nothing: 0, not NaN.
            out = (s * g[pos])[:, None] / g[None, :]
            out[(s == 0)[:, None] & ~missing[None, :]] = 0.0
        out[~known] = np.nan
        values[dim] = out
    return NormalizedSensitivity(archs=tuple(fleet.archs.index), values=values)
