"""Rules and goals: the plugins every solver, the verifier and the summary understand.

The Kubernetes scheduling framework's idea: a **rule** is a filter (a hard constraint
on placements), a **goal** a scorer (a weighted term of the objective to minimize).
A :class:`~packer.model.problem.PlacementProblem` carries its rules and goals; each
knows how to

* check a whole placement (:meth:`Rule.violations`, :meth:`Goal.value`) — what
  :func:`packer.model.metrics.violations` and :func:`packer.model.metrics.evaluate`
  and so ``packer verify`` use;
* act incrementally on a :class:`~packer.model.state.PlacementState` for the
  heuristics (:meth:`Rule.admits` filters the hosts a task may move to now,
  :meth:`Rule.holds` checks the state after a batch of moves, :meth:`Goal.delta`
  scores a move), keeping its own tallies up to date through :meth:`Rule.attach` and
  :meth:`Rule.on_move`;
* state itself in the exact model (:meth:`Rule.add_to_model`,
  :meth:`Goal.add_to_model` on a :class:`~packer.solvers.exact.ExactModel`, which is
  handed to CP-SAT and to PuLP);
* describe itself for the plan's summary (:meth:`Rule.describe`);
* state, where it caps a host's load besides capacity, that cap for the bounds
  (:meth:`Rule.load_limits`); a goal that prices load beyond a soft capacity states
  that price (:meth:`Goal.soft_capacity`).

Which solver strategy honours which rule is declared once, by the rule
(:attr:`Rule.strategies`), and checked in one place
(:func:`packer.solvers.run.check_support`). Adding a rule is one new module with one
subclass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from packer.model.problem import PlacementProblem
    from packer.model.state import PlacementState
    from packer.solvers.exact import ExactModel

#: Solver strategies (``packer solve --solver`` families): the scalable engine, the exact
#: models, the leximin ``fair`` solvers and the baseline policies.
STRATEGIES = ("engine", "exact", "fair", "baselines")


@dataclass(frozen=True)
class LoadLimits:
    """Columns of host load a rule caps besides capacity (:meth:`Rule.load_limits`), in the rule's load units.

    ``demand`` (T, J): each task's load. ``limit`` (H, J): the most load host h may carry
    while every task on it today stays there (an empty host: whatever arrives), tolerance
    included; ``inf``: no limit. ``rise`` (H, J) ≥ 0: how far the limit may rise per task that
    leaves h (m tasks leaving raise it by at most m × rise); ``inf``: no bound known.
    """

    demand: np.ndarray
    limit: np.ndarray
    rise: np.ndarray


@dataclass(frozen=True)
class SoftCapacity:
    """A goal's term that prices load beyond a capacity (:meth:`Goal.soft_capacity`): ``Σ_h Σ_k price[h,k] · max(0, load[h,k] − capacity[h,k])``
    with ``load[h,k]`` the sum of ``demand[t,k]`` over the tasks on h.

    ``demand`` (T, K) in the goal's load units; ``capacity`` (H, K) in the same units (``inf``: no term);
    ``price`` (H, K) ≥ 0, objective units per unit of load beyond capacity (weight included).
    """

    demand: np.ndarray
    capacity: np.ndarray
    price: np.ndarray


class Rule:
    """A hard constraint. Subclasses override what applies; the defaults constrain nothing.

    ``name`` is what messages and the summary call the rule; ``strategies`` the solver
    strategies (:data:`STRATEGIES`) that honour it.
    """

    name: ClassVar[str] = "rule"
    strategies: ClassVar[tuple[str, ...]] = STRATEGIES
    #: The most tasks the rule lets leave their host; None when it does not limit moves.
    move_limit: int | None = None

    def violations(self, problem: PlacementProblem, assign: np.ndarray) -> list[str]:
        """Readable sentences for each way ``assign`` (T,) breaks the rule; [] when it holds."""
        return []

    def attach(self, state: PlacementState) -> Any:
        """Tallies this rule keeps on ``state`` (returned object is stored as ``state.tally[self]``); None for none."""
        return None

    def on_move(self, state: PlacementState, t: int, frm: int, to: int) -> None:
        """Update this rule's tallies: task ``t`` went from host ``frm`` (-1: unplaced) to ``to``."""

    def admits(self, state: PlacementState, t: int, hosts: np.ndarray) -> np.ndarray:
        """(n,) bool: which of ``hosts`` task ``t`` may move to in ``state`` now (its current host excluded by callers)."""
        return np.ones(len(hosts), dtype=bool)

    def holds(self, state: PlacementState) -> bool:
        """Whether the whole state keeps the rule (checked after a batch of moves by heuristics)."""
        return True

    def preference(self, state: PlacementState, t: int, hosts: np.ndarray) -> np.ndarray | None:
        """(n,) a key to rank ``hosts`` before the objective (lower first), or None (no preference)."""
        return None

    def candidates(self, problem: PlacementProblem, fixed_load: np.ndarray, pair_task: np.ndarray, pair_host: np.ndarray) -> np.ndarray:
        """(P,) bool: which (task, host) pairs may be in the exact model at all (a task may always stay; see the callers)."""
        return np.ones(len(pair_task), dtype=bool)

    def add_to_model(self, model: ExactModel) -> None:
        """State the rule in the exact model (called only when ``"exact"`` is among :attr:`strategies`)."""

    def load_limits(self, problem: PlacementProblem) -> LoadLimits | None:
        """The host loads the rule caps besides capacity, for the bounds (:func:`packer.solvers.bounds.freeable_cost_bound`,
        :func:`packer.solvers.bounds.repack_cost_bound`); None where it caps none."""
        return None

    def describe(self) -> dict[str, Any]:
        """The rule and its parameters, for the summary."""
        return {"rule": self.name}


class Goal:
    """A term of the objective (objective units: the cost units of the primary goal), times ``weight``.

    ``value`` of a placement and ``delta`` of a move are already weighted.
    """

    name: ClassVar[str] = "goal"
    #: The key of the goal's term in a plan's ``objective`` summary.
    term: ClassVar[str] = "goal"
    #: Whether the goal is the primary one, whose :meth:`open_cost` the bounds and the engine's targets price.
    primary: ClassVar[bool] = False
    #: Whether the heuristics rank by the goal only after best fit (a tie-break such as fewer moves), not before.
    tie_break: ClassVar[bool] = False

    def __init__(self, weight: float = 1.0):
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"the weight of goal {self.name} must be finite and >= 0, got {weight}")
        self.weight = float(weight)

    def value(self, problem: PlacementProblem, assign: np.ndarray) -> float:
        """The weighted term for the placement ``assign`` (T,)."""
        return 0.0

    def open_cost(self, problem: PlacementProblem) -> np.ndarray | None:
        """(H,) weighted cost of a host being occupied, for goals that are a sum over occupied hosts (up to a constant); else None."""
        return None

    def delta(self, state: PlacementState, t: int, hosts: np.ndarray) -> np.ndarray:
        """(n,) change of the weighted term if task ``t`` moved from where ``state`` has it to each of ``hosts``.

        Goals whose term is :meth:`open_cost` over occupied hosts get that for free from
        :meth:`packer.model.state.PlacementState.objective_delta`; override for others.
        """
        return np.zeros(len(hosts))

    def add_to_model(self, model: ExactModel) -> None:
        """Add the weighted term to the exact model's objective (the part outside the model as its constant)."""

    def soft_capacity(self, problem: PlacementProblem) -> SoftCapacity | None:
        """The weighted term as load priced beyond a capacity, for the bounds (:func:`packer.solvers.bounds.repack_cost_bound`,
        :func:`packer.solvers.bounds.freeable_cost_bound`); None for a term of another form (e.g. weight 0)."""
        return None

    def least(self, problem: PlacementProblem) -> float:
        """A lower bound on the weighted term over valid placements (objective units); 0 for a term that cannot be negative."""
        return 0.0

    def describe(self) -> dict[str, Any]:
        return {"goal": self.name, "weight": self.weight}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(weight={self.weight:g})"
