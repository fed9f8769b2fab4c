"""What :mod:`packer.plan.verify` can prove about a plan's status, bound and solver flags, and what stays a claim.

A plan's ``summary.json`` reports, besides numbers :func:`packer.plan.plan.plan_metrics`
recomputes, what its solver found: ``status``, ``bound`` (a lower bound on the
objective), the solver's ``stats`` (``interrupted``, ``timed_out``, the engine's bound
details) and ``runtime_s``. :func:`check_claims` re-derives each of them it can:

* **its own lower bound** L on the objective, by the deterministic methods a solve uses:
  the engine's bound (:func:`packer.solvers.run.engine_bound`: the LP on what the move
  budget can free, capped by the full repack's MILP bound, or the MILP over architectures for a
  full repack); for an engine plan whose bound came from column generation (a full repack's,
  or one capping what a budget can free, on the full repack or within the budget), a run of it with the plan's time limit
  (:func:`packer.solvers.run.pattern_lower_bound`, :func:`packer.solvers.run.budget_pattern_bound`; under
  ``--deterministic`` it reproduces the
  solve's and the summary must state it); for a plan of an exact solver (cbc,
  highs, cpsat) that claims ``optimal`` or a bound above the engine's, and for an engine
  plan that claims ``optimal`` (CP-SAT's proof over the whole instance), the optimum, by
  re-solving the exact model with CBC (single-threaded,
  the plan's seed; up to :data:`packer.solvers.run.EXACT_MAX_PAIRS` ``["cbc"]`` task-host
  pairs and :func:`exact_time_limit` seconds);
* ``bound``: where the solve's method is deterministic (the engine's LP and converged
  MILP bounds, CBC's optimum and CBC's LP relaxation after a time limit, or the engine's bound
  where that is higher: :func:`packer.solvers.run.run_solver` states the better) the summary must
  state what verify recomputed, except that an engine plan's LP or MILP bound may be less
  where it is at most L (the looser bound an earlier version of packer computed; its
  details must follow from it); otherwise (column generation, HiGHS's or CP-SAT's dual
  bound, an unknown solver) it is a claim: *proven valid* when at most L, *wrong* when
  above the objective, above the optimum verify proved or above a column generation that
  converged, and otherwise listed as a claim, not verified. Solvers without a bound
  (baselines, the ``fair`` goal) must report none;
* ``status``: ``optimal`` only when the objective meets L (within
  :data:`OPTIMAL_TOLERANCE`): verify proved no placement is better; with a bound, that
  bound must then meet the objective too (a gap of at most :data:`OPTIMAL_TOLERANCE`).
  The ``fair`` goal's leximin optimality is not re-proven: a claim;
* ``solver.stats``: ``interrupted`` and ``timed_out`` are booleans; an interrupted solve
  never finished a proof, so ``interrupted`` with status ``optimal`` is wrong, and a solve
  that ``timed_out`` ran at least its time limit (``runtime_s``); anything else about
  them is a claim (a solve whose time counted as work, ``--deterministic``, may time out
  sooner by the clock). The engine's bound details (``freeable_bound``, ``freeable_lp``,
  ``repack_lower_bound`` unless column generation's, ``primary_before``,
  ``freed``, ``share_of_bound``, ``primary_lower_bound``, ``primary_gap``,
  ``primary_and_soft_lower_bound``, ``objective_floor``), its ``objective_check`` and
  ``moves``, and ``solver.objective`` are recomputed.

``runtime_s``, ``created_utc``, the solver's other statistics and the package versions are
claims: listed, never silently accepted. The gap itself is checked with the objective in
:mod:`packer.plan.verify` (:func:`packer.plan.plan.relative_gap` of the recomputed
objective and the summary's bound).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from packer.model.metrics import evaluate
from packer.model.problem import PlacementProblem
from packer.plan.context import PlanContext
from packer.rules.budget import MoveBudget
from packer.solvers.exact import build_exact_model
from packer.solvers.milp import lp_relaxation_bound, solve_milp
from packer.solvers.patterns import PatternResult, supported
from packer.solvers.budget_patterns import BudgetPatterns
from packer.solvers.run import (BUDGET_PATTERN_METHOD, EXACT_MAX_PAIRS, PATTERN_METHOD, bound_detail, budget_pattern_bound,
                                candidate_pairs, cap_freeable, engine_bound, objective_bound, pattern_lower_bound)

#: Relative tolerance of "the objective meets the bound" for status ``optimal`` (CP-SAT rounds its objective to ~1e-6 per host and task).
OPTIMAL_TOLERANCE = 1e-4
#: Relative tolerance when a recomputed bound must equal the summary's.
BOUND_TOLERANCE = 1e-6
#: Solvers whose ``optimal`` verify re-proves by an exact re-solve.
EXACT_SOLVERS = tuple(EXACT_MAX_PAIRS)
#: Time limit (seconds) of a solve whose context records none (the CLI's and API's default).
DEFAULT_TIME_LIMIT = 60.0
#: The solver stats keys :func:`check_claims` checks; the solver's other stats are its own statistics (claims).
_CHECKED_STATS = ("interrupted", "timed_out", "bound", "objective_check", "moves")


@dataclass
class ClaimsFinding:
    """What :func:`check_claims` found: ``wrong`` (one line per false key), ``proven`` (what it re-derived) and ``claims`` (what it could not)."""

    wrong: list[str] = field(default_factory=list)
    proven: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)


@dataclass
class _Lower:
    """Verify's own lower bounds on the objective (objective units): the best one, how it was found, and the exact optimum if proven."""

    value: float = -math.inf
    how: str = "none"
    optimum: float | None = None

    def add(self, value: float | None, how: str) -> None:
        if value is not None and math.isfinite(value) and value > self.value:
            self.value, self.how = float(value), how


def exact_time_limit(context: PlanContext) -> float:
    """Seconds verify gives CBC to re-prove an exact plan's optimum: twice the solve's time limit, at least 10."""
    return max(10.0, 2.0 * (context.time_limit_s or DEFAULT_TIME_LIMIT))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _close(a: float, b: float, rel: float = BOUND_TOLERANCE) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=rel)


def _slack(objective: float) -> float:
    """The absolute slack of :data:`OPTIMAL_TOLERANCE` at ``objective``."""
    return OPTIMAL_TOLERANCE * max(1.0, abs(objective))


def check_claims(problem: PlacementProblem, context: PlanContext, summary: dict[str, Any], assign: np.ndarray) -> ClaimsFinding:
    """Check ``summary``'s status, bound and solver flags for the valid placement ``assign`` of ``problem`` (module doc)."""
    found = ClaimsFinding()
    objective = evaluate(problem, assign).objective
    solver = summary.get("solver") if isinstance(summary.get("solver"), dict) else {}
    name = str(solver.get("name", ""))
    stats = solver.get("stats") if isinstance(solver.get("stats"), dict) else {}
    detail = stats.get("bound") if isinstance(stats.get("bound"), dict) else {}
    status, bound = summary.get("status"), summary.get("bound")
    if bound is not None and not _is_number(bound):
        found.wrong.append(f"bound: summary says {bound!r}, expected a number or null")
        bound = None

    lower = _Lower()
    looser_ok = False
    by_auto: str | None = None
    own: dict = {}
    expected: float | None = None  # the bound a deterministic method of the solve gives
    method = ""
    if not problem.fair:
        own_value, own, _ = engine_bound(problem)
        method = ("the primary cost today minus the LP bound on what the move budget can free" if "freeable_bound" in own
                  else "the MILP lower bound over architectures")
        if own.get("primary_and_soft_lower_bound", -math.inf) + own.get("objective_floor", 0.0) >= own_value:
            method = "the lower bound on the primary cost and the interference term" + (
                ": the MILP over architectures and the LP on what the move budget can free less the interference it leaves"
                if "freeable_bound" in own else ", the MILP over architectures")
        lower.add(own_value, method)
        # The engine's LP and MILP bounds have grown tighter from one version of packer to the next: a plan made by an
        # earlier one states a looser bound, still valid. Column generation's and the exact solvers' must match.
        # An engine plan whose bound ``auto``'s exact solver raised states that solver's dual bound: a claim, as for the solver itself.
        by_auto = _bound_from_auto(stats, bound) if name == "engine" else None
        looser_ok = name == "engine" and bool(own.get("exact")) and status != "optimal" and by_auto is None
        if name == "engine" and own.get("exact") and by_auto is None:
            expected = own_value
        kind = str(detail.get("kind", ""))
        patterns = _pattern_bound(problem, context, own, kind) if name == "engine" and "column generation" in kind else None
        if patterns is not None:
            cg, run = patterns
            how = BUDGET_PATTERN_METHOD if BUDGET_PATTERN_METHOD in kind else PATTERN_METHOD
            lower.add(cg, f"{how} (verify's run)")
            # Counted as work (--deterministic) the run is reproducible and its bound must be the summary's; by wall clock, a claim.
            expected, looser_ok = None, False
            if context.deterministic and not run.capped:
                expected, method = cg, f"{how}, counted as work"
            if run.converged and bound is not None and bound > cg + _slack(cg):
                found.wrong.append(f"bound: summary says {bound!r}, above the column-generation bound {cg!r} verify computed, "
                                   "which converged: no run of it can go higher")
        # An exact re-solve is slow: only when the plan claims more than verify's own bound shows.
        needs_proof = status == "optimal" or (bound is not None and bound > lower.value + _slack(lower.value))
        # The engine claims optimal only on CP-SAT's proof over the whole instance (the exact model): re-proven the same way.
        if (name in EXACT_SOLVERS or (name == "engine" and status == "optimal")) and needs_proof:
            expected, method = _exact_bound(problem, context, name, status, lower, found)
            looser_ok = False
        elif name == "cbc":
            expected, method = _relaxation_bound(problem)
            # packer.solvers.run._run_exact states the better of that and the engine's bound; earlier versions, the former.
            if expected is not None and own_value > expected:
                expected, looser_ok = own_value, True
                method = f"the better of {method} and {lower.how}"
    boundless = "the fair goal's solvers compute" if problem.fair else f"the {name} policy computes" if name.startswith("baseline-") else None
    # An exact solver's plan states the engine's bound where that was higher than its own (packer.solvers.run._run_exact).
    source = by_auto or ("the engine" if name in EXACT_SOLVERS and "solver_bound" in stats else name)
    _check_bound(found, source, bound, objective, expected, method, lower, boundless, looser_ok)
    _check_status(found, problem, status, bound, objective, lower)
    _check_flags(found, context, summary, stats, status)
    if own:
        _check_engine_detail(found, problem, assign, detail, own, bound, name, status, looser_ok, by_auto is not None)
    moves = int((assign != problem.current).sum())
    for key, value, recomputed in (("solver.objective", solver.get("objective"), objective),
                                   ("solver.stats.objective_check", stats.get("objective_check"), objective),
                                   ("solver.stats.moves", stats.get("moves"), moves)):
        if value is not None and not (_is_number(value) and _close(value, recomputed)):
            found.wrong.append(f"{key}: summary says {value!r}, recomputed {recomputed!r}")
    counts = [key for key in stats if key not in _CHECKED_STATS]
    if counts:
        found.claims.append(f"solver.stats {', '.join(counts)}: the solver's own statistics")
    found.claims += [f"runtime_s: {summary.get('runtime_s')!r}", f"created_utc: {summary.get('created_utc')!r}"]
    versions = context.versions or {}
    found.claims.append("context.versions: " + ", ".join(f"{package} {version}" for package, version in versions.items() if version))
    return found


def _pattern_bound(problem: PlacementProblem, context: PlanContext, own: dict,
                   kind: str) -> tuple[float, PatternResult | BudgetPatterns] | None:
    """The objective's bound a solve of ``problem`` gets from column generation (verify's run of it, with the plan's time
    limit) and the run: on a full repack, raising ``own``'s MILP bound over architectures
    (:func:`packer.solvers.run.pattern_lower_bound`); with a move budget, capping what the budget can free
    (:func:`packer.solvers.run.cap_freeable`), within the budget where the plan's bound (its ``kind``) says so
    (:func:`packer.solvers.run.budget_pattern_bound`), else on the same problem without it. None where column generation
    does not apply."""
    time_limit = context.time_limit_s or DEFAULT_TIME_LIMIT
    if "freeable_lp" in own and BUDGET_PATTERN_METHOD in kind:
        lower, within = budget_pattern_bound(problem, time_limit, context.deterministic)
        if within is None:
            return None
        capped = dict(own)
        if math.isfinite(lower):
            cap_freeable(problem, capped, lower, BUDGET_PATTERN_METHOD, within_budget=True)
        return objective_bound(capped), within
    if "primary_lower_bound" in own and supported(problem):
        cg, run = pattern_lower_bound(problem, time_limit, own["primary_lower_bound"], context.deterministic)
        return objective_bound({**own, "primary_lower_bound": cg}), run  # on the primary cost: the objective's bound
    unbudgeted = problem.with_rule(None, replaces=MoveBudget)
    if "freeable_lp" in own and supported(unbudgeted):
        cg, run = pattern_lower_bound(unbudgeted, time_limit, own["repack_lower_bound"], context.deterministic)
        capped = dict(own)
        cap_freeable(problem, capped, cg, PATTERN_METHOD)
        return objective_bound(capped), run
    return None


def _exact_bound(problem: PlacementProblem, context: PlanContext, name: str, status: Any, lower: _Lower,
                 found: ClaimsFinding) -> tuple[float | None, str]:
    """For an exact solver's plan: the optimum by CBC (into ``lower``) and the bound the solve's method gives (None if not deterministic)."""
    unsupported = [rule.name for rule in problem.rules if "exact" not in rule.strategies]
    pairs = candidate_pairs(problem)
    if unsupported or pairs > EXACT_MAX_PAIRS["cbc"]:
        why = f"rules {', '.join(unsupported)}" if unsupported else f"{pairs:,} task-host pairs (more than {EXACT_MAX_PAIRS['cbc']:,})"
        found.claims.append(f"the exact optimum: not re-solved ({why})")
        return None, ""
    limit = exact_time_limit(context)
    try:
        again = solve_milp(problem, solver="cbc", time_limit=limit, seed=context.seed)
    except RuntimeError as exc:
        found.claims.append(f"the exact optimum: verify's CBC re-solve failed ({exc})")
        return None, ""
    if again.status == "optimal":
        lower.add(again.bound, "the optimum verify re-proved with CBC")
        lower.optimum = again.objective
    else:
        lower.add(again.bound, f"CBC's bound after {limit:g} s (verify's re-solve)")
        found.claims.append(f"the exact optimum: verify's CBC re-solve did not prove it within {limit:g} s")
    if name != "cbc":
        return None, ""
    if status == "optimal":
        return (again.bound, "CBC's proven optimum") if again.status == "optimal" else (None, "")
    return _relaxation_bound(problem)


def _relaxation_bound(problem: PlacementProblem) -> tuple[float | None, str]:
    """The bound CBC reports when its time limit stops it (:mod:`packer.solvers.milp`): the exact model's LP relaxation."""
    model = build_exact_model(problem)
    relaxed = lp_relaxation_bound(model)
    if relaxed is None:
        return None, ""
    value = relaxed + model.constant
    return value - 1e-7 * max(1.0, abs(value)), "the exact model's LP relaxation, CBC's bound when its time limit stops it"


def _check_bound(found: ClaimsFinding, name: str, bound: float | None, objective: float, expected: float | None, method: str,
                 lower: _Lower, boundless: str | None, looser_ok: bool = False) -> None:
    """``bound`` against the solve's deterministic method (``expected``), the objective and verify's ``lower`` bounds.

    ``boundless``: who computes no bound, for a solver that reports none (baselines, the fair goal); None otherwise.
    ``looser_ok``: a bound below ``expected`` is valid (an earlier version's method), not wrong.
    """
    if bound is None:  # no bound claims nothing (the gap is then unknown)
        return
    if bound > objective + BOUND_TOLERANCE * max(1.0, abs(objective)):
        found.wrong.append(f"bound: summary says {bound!r}, above the plan's own objective {objective!r}; a lower bound cannot be")
    elif expected is not None:
        if _close(bound, expected):
            found.proven.append(f"bound {bound:.6g}: recomputed ({method})")
        elif looser_ok and bound < expected:
            found.proven.append(f"bound {bound:.6g}: valid, below the {expected:.6g} this version of packer computes ({method}); "
                                "earlier versions computed looser bounds: solve again for this one")
        else:
            found.wrong.append(f"bound: summary says {bound!r}, recomputed {expected!r} ({method})")
    elif boundless:
        found.wrong.append(f"bound: summary says {bound!r}, but {boundless} no bound")
    elif lower.optimum is not None and bound > lower.optimum + _slack(lower.optimum):
        found.wrong.append(f"bound: summary says {bound!r}, above the optimum {lower.optimum!r} verify proved")
    elif bound <= lower.value + BOUND_TOLERANCE * max(1.0, abs(lower.value)):
        found.proven.append(f"bound {bound:.6g} ({name or 'the solver'}'s): valid, at most the lower bound {lower.value:.6g} verify computed ({lower.how})")
    elif not any(line.startswith("bound:") for line in found.wrong):  # not already refuted by a converged column generation
        best = "none" if not math.isfinite(lower.value) else f"{lower.value:.6g} ({lower.how})"
        found.claims.append(f"bound {bound!r}: {name or 'the solver'}'s own bound, above verify's best lower bound {best}")


def _check_status(found: ClaimsFinding, problem: PlacementProblem, status: Any, bound: float | None, objective: float,
                  lower: _Lower) -> None:
    """``status``: ``feasible`` is true of every valid plan; ``optimal`` only when verify's lower bound meets the objective."""
    if status not in ("optimal", "feasible"):
        found.wrong.append(f"status: summary says {status!r}; a plan's status is optimal or feasible")
        return
    if status == "feasible":
        return
    if problem.fair:
        found.claims.append("status 'optimal': the fair goal's leximin optimality is not re-proven")
        return
    if objective <= lower.value + _slack(objective):
        found.proven.append(f"status optimal: the objective {objective:.6g} meets the lower bound {lower.value:.6g} verify computed ({lower.how})")
    else:
        best = "no lower bound" if not math.isfinite(lower.value) else f"its best lower bound is {lower.value!r} ({lower.how})"
        found.wrong.append(f"status: summary says 'optimal', but verify proved no bound the objective {objective!r} meets: {best}")
    if bound is not None and bound < objective - _slack(objective):
        found.wrong.append(f"bound: summary says {bound!r} with status 'optimal': an optimal plan's bound meets its objective {objective!r}")


def _check_flags(found: ClaimsFinding, context: PlanContext, summary: dict[str, Any], stats: dict, status: Any) -> None:
    """``interrupted`` and ``timed_out``: booleans, consistent with the status and the runtime; otherwise claims."""
    flags = {key: stats[key] for key in ("interrupted", "timed_out") if key in stats}
    for key, value in flags.items():
        if not isinstance(value, bool):
            found.wrong.append(f"solver.stats.{key}: summary says {value!r}, expected true or false")
    if flags.get("interrupted") is True and status == "optimal":
        found.wrong.append("solver.stats.interrupted: summary says true with status 'optimal': an interrupted solve never finished a proof")
    runtime, limit = summary.get("runtime_s"), context.time_limit_s
    # Counted as work (--deterministic), a time limit can be reached in fewer seconds by the clock.
    if flags.get("timed_out") is True and _is_number(runtime) and limit is not None and runtime < limit * (1 - 1e-3) \
            and not context.deterministic:
        found.wrong.append(f"solver.stats.timed_out: summary says true, but runtime_s {runtime!r} is below the time limit {limit!r}")
    if flags:
        found.claims.append(", ".join(f"solver.stats.{key}: {json.dumps(value)}" for key, value in flags.items()))


def _bound_from_auto(stats: dict, bound: Any) -> str | None:
    """The exact solver ``auto`` ran after the engine (``stats["auto"]``) whose bound the plan's ``bound`` is, not the engine's; else None."""
    runs = stats.get("auto") if isinstance(stats.get("auto"), dict) else {}
    engine = runs.get("engine") if isinstance(runs.get("engine"), dict) else {}
    for key, run in runs.items():
        if key != "engine" and isinstance(run, dict) and _is_number(run.get("bound")) and _is_number(bound) \
                and _close(run["bound"], bound) and run["bound"] != engine.get("bound"):
            return str(key)
    return None


def _check_engine_detail(found: ClaimsFinding, problem: PlacementProblem, assign: np.ndarray, detail: dict, own: dict,
                         bound: float | None, name: str, status: Any, looser_ok: bool = False, by_auto: bool = False) -> None:
    """The engine's bound details (``solver.stats.bound``) against verify's :func:`engine_bound` and the placement;
    ``looser_ok`` as for :func:`_check_bound` (the details then follow from the plan's looser bound); ``by_auto``: the plan's
    bound is the dual bound of ``auto``'s exact solver, not derived from the details."""
    expected: dict[str, Any] = {}
    if "freeable_bound" in detail and "freeable_bound" in own:
        freeable, floor = own["freeable_bound"], own.get("objective_floor", 0.0)
        if looser_ok and _is_number(bound) and bound < own["primary_before"] - freeable + floor - _slack(bound):
            freeable = own["primary_before"] + floor - bound  # what the plan's looser bound says the budget can free
        patterns = "column generation" in str(detail.get("kind", "")) and "freeable_lp" in own
        claimed = [detail[key] for key in ("repack_lower_bound", "budget_lower_bound") if _is_number(detail.get(key))]
        if patterns and claimed:
            # Capped by the plan's column-generation bound on the full repack or within the budget (a claim, checked with
            # the plan's bound).
            freeable = min(freeable, own["primary_before"] - max(claimed))
            if _is_number(bound) and not by_auto and not _close(bound, objective_bound({**own, "freeable_bound": freeable})):
                found.wrong.append(f"bound: summary says {bound!r}, not what its freeable_bound {freeable!r} gives")
        reached = bound_detail(problem, assign, {**own, "freeable_bound": freeable})
        expected = {key: reached[key] for key in ("primary_before", "freed", "share_of_bound")}
        if own.get("exact"):
            expected["freeable_bound"] = freeable
            expected.update({key: own[key] for key in ("freeable_lp",) + (() if patterns else ("repack_lower_bound",)) if key in own})
    elif "primary_lower_bound" in detail:
        # The engine's bound is its primary lower bound plus the objective's floor (:func:`packer.solvers.run.objective_bound`),
        # unless the bound on the primary cost and soft terms is higher, or a proof (the engine's CP-SAT, or auto's exact
        # solver) raised the plan's bound above it.
        floor, soft = own.get("objective_floor", 0.0), own.get("primary_and_soft_lower_bound")
        if looser_ok and soft is not None and _is_number(detail.get("primary_and_soft_lower_bound")):
            soft = min(soft, detail["primary_and_soft_lower_bound"])  # an earlier version's, checked below
        from_soft = soft is not None and _is_number(bound) and _close(bound - floor, soft)
        engines = name == "engine" and status != "optimal" and not by_auto  # the bound is the engine's own
        own_bound = engines and not from_soft
        lower = (bound - floor if _is_number(bound) else bound) if own_bound else detail["primary_lower_bound"]
        expected = {"primary_lower_bound": lower} if own_bound else {}
        if engines and from_soft and own.get("exact") and "column generation" not in str(detail.get("kind", "")):
            # The plan's bound is the soft one: its primary lower bound is then the MILP's, which verify recomputed.
            expected["primary_lower_bound"] = own["primary_lower_bound"]
        if _is_number(lower) and _is_number(bound) and lower + floor > bound + _slack(bound):
            found.wrong.append(f"solver.stats.bound.primary_lower_bound: summary says {lower!r}, above the plan's bound {bound!r}"
                               + (f" less the objective's floor {floor!r}" if floor else ""))
        if _is_number(lower):
            expected["primary_gap"] = bound_detail(problem, assign, {"primary_lower_bound": lower})["primary_gap"]
    if "objective_floor" in own:
        expected["objective_floor"] = own["objective_floor"]
    if "primary_and_soft_lower_bound" in own and own.get("exact"):
        claimed, floor = detail.get("primary_and_soft_lower_bound"), own.get("objective_floor", 0.0)
        earlier = (looser_ok and _is_number(claimed) and _is_number(bound) and claimed < own["primary_and_soft_lower_bound"]
                   and claimed + floor <= bound + _slack(bound))  # an earlier version's looser bound, within the plan's
        if not earlier:
            expected["primary_and_soft_lower_bound"] = own["primary_and_soft_lower_bound"]
    for key, value in expected.items():
        claimed = detail.get(key)
        if key not in detail:
            continue
        if value is None or claimed is None:
            if value is not claimed:
                found.wrong.append(f"solver.stats.bound.{key}: summary says {claimed!r}, recomputed {value!r}")
        elif not (_is_number(claimed) and _close(claimed, value)):
            found.wrong.append(f"solver.stats.bound.{key}: summary says {claimed!r}, recomputed {value!r}")
