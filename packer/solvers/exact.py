"""The exact placement model, generated once from the problem's rules and goals and handed to every MILP/CP backend.

A solve is of a *neighbourhood*: the placement of some *free* tasks over some hosts,
starting from a valid placement ``base`` with every other task fixed where ``base``
puts it (:func:`build_formulation`; a whole-instance solve is "all movable tasks over
all hosts, from the current placement"). :func:`build_exact_model` states it as an
:class:`ExactModel`: a boolean ``x[p]`` per candidate (task, host) pair — each free
task on exactly one — plus whatever each rule and goal adds through
:meth:`packer.rules.base.Rule.add_to_model` and :meth:`packer.rules.base.Goal.add_to_model`.
The backends translate the same object: CP-SAT (:mod:`packer.solvers.cpsat`), PuLP
with CBC and OR-Tools MathOpt with HiGHS (:mod:`packer.solvers.milp`), so they cannot
drift.

Variables are boolean, integer, or continuous with a *unit*; constraints are linear,
optionally enforced by boolean literals (all true), of one *kind*:

* ``count``: integral coefficients and right-hand side (assignment, spread counts,
  the move budget); stated as is everywhere; boolean implications ``a → b`` are
  listed apart (:attr:`ExactModel.implications`);
* ``physical``: real coefficients over quantities that must never be exceeded
  (capacities, RP load limits); CP-SAT rounds them so that every placement it
  accepts satisfies the real constraint (:mod:`packer.solvers.cpsat`), the MILP
  backends keep the constraint's ``margin`` (capacity: half of
  :data:`packer.model.metrics.TOLERANCE`, against their own tolerances);
  constraints of one ``unit`` share one integer scale in CP-SAT, and continuous
  variables of that unit appear with coefficient ±1;
* ``objective``: ``v − Σ a·x ≥ b`` defining a continuous objective variable ``v``
  of unit ``objective`` from below (the sensitivity excess); CP-SAT rounds so that
  the integer objective never overstates the real one, which keeps its bound valid.

The objective is the sum of the goals' terms plus :attr:`ExactModel.constant` (the
part of the objective that does not depend on the free tasks), in objective units.
Every variable has a hint: its value in ``base``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from packer.model.metrics import TOLERANCE, host_loads, occupied, violations
from packer.model.problem import PlacementProblem

#: Variable kinds of :class:`ExactModel`.
BOOL, CONT = "bool", "cont"
#: Constraint kinds (module doc).
KINDS = ("count", "physical", "objective")


@dataclass(frozen=True)
class Formulation:
    """The neighbourhood as index sets and base quantities. Units: demand/slack in the problem's dimension units.

    Attributes:
      problem, base: the instance and the valid starting placement (T,)
      free (F,): free task indices; is_free (T,) bool
      hosts (M,): host indices of the neighbourhood; in_model (H,) bool
      pair_task, pair_host (P,): candidate (task, host) pairs, sorted by task
      task_start (F+1,): pairs of free[i] are pair_task[task_start[i]:task_start[i+1]]
      pair_base (P,) bool: the pair is the task's host in ``base``
      pair_current (P,) bool: the pair is the task's current host (staying = no move)
      always_open (H,) bool: the host holds a fixed task (occupied whatever happens)
      slack (H, D): capacity + TOLERANCE − load in ``base`` (negative = over capacity)
      fixed_moves: moves made whatever the model decides (fixed tasks off their
        current host, free tasks that cannot stay)
    """

    problem: PlacementProblem
    base: np.ndarray
    free: np.ndarray
    is_free: np.ndarray
    hosts: np.ndarray
    in_model: np.ndarray
    pair_task: np.ndarray
    pair_host: np.ndarray
    task_start: np.ndarray
    pair_base: np.ndarray
    pair_current: np.ndarray
    always_open: np.ndarray
    slack: np.ndarray
    fixed_moves: int

    @property
    def model_hosts(self) -> np.ndarray:
        """Hosts of the neighbourhood whose occupancy the model decides (no fixed task on them)."""
        return self.hosts[~self.always_open[self.hosts]]

    @cached_property
    def _by_host(self) -> dict[int, list[int]]:
        order = np.argsort(self.pair_host, kind="stable")
        hosts, starts = np.unique(self.pair_host[order], return_index=True)
        return {int(h): chunk.tolist() for h, chunk in zip(hosts, np.split(order, starts[1:]))}

    def pairs_by_host(self) -> dict[int, list[int]]:
        """Candidate pair indices per host."""
        return self._by_host

    def assignment(self, chosen: np.ndarray) -> np.ndarray:
        """The full placement (T,) given the chosen pairs (bool (P,), one per free task)."""
        assign = self.base.copy()
        assign[self.pair_task[chosen]] = self.pair_host[chosen]
        return assign


def unplaceable_tasks(problem: PlacementProblem) -> np.ndarray:
    """Indices of tasks with no host to be on: no valid current host and no eligible host that could hold them even empty.

    The current placement always satisfies :func:`packer.model.metrics.violations` (nothing
    moved, nothing gained), so a task can only fail to fit when it has no current host.
    """
    has_current = (problem.current >= 0) & (problem.current < problem.n_hosts)
    homeless = np.flatnonzero(~has_current)
    if len(homeless) == 0:
        return homeless
    fits = (problem.demand[homeless, None, :] <= problem.capacity[None, :, :] + TOLERANCE).all(axis=2)
    fits &= problem.eligible[homeless][:, problem.host_arch] & problem.movable[homeless, None]
    return homeless[~fits.any(axis=1)]


def build_formulation(problem: PlacementProblem, base: np.ndarray | None = None, tasks: np.ndarray | None = None,
                      hosts: np.ndarray | None = None) -> Formulation:
    """The neighbourhood "``tasks`` over ``hosts``, starting from ``base``" (defaults: all tasks, all hosts, current placement).

    Pinned tasks among ``tasks`` stay fixed. The neighbourhood's hosts are ``hosts``
    plus the ``base`` hosts of the free tasks (a free task may always stay); a free
    task may enter a host of ``hosts`` where every rule's
    :meth:`~packer.rules.base.Rule.candidates` allows it. Raises ``ValueError`` when
    ``base`` is not a valid placement.
    """
    p = problem
    base = p.current.copy() if base is None else np.asarray(base, dtype=np.int64).copy()
    broken = violations(p, base)
    if broken:
        raise ValueError(f"the starting placement is invalid: {'; '.join(broken)}")
    task_ids = np.arange(p.n_tasks) if tasks is None else np.unique(np.asarray(tasks, dtype=np.int64))
    subset = np.arange(p.n_hosts) if hosts is None else np.unique(np.asarray(hosts, dtype=np.int64))
    free = task_ids[p.movable[task_ids]]
    is_free = np.zeros(p.n_tasks, dtype=bool)
    is_free[free] = True
    model_hosts = np.union1d(subset, base[free])
    in_subset = np.zeros(p.n_hosts, dtype=bool)
    in_subset[subset] = True
    in_model = np.zeros(p.n_hosts, dtype=bool)
    in_model[model_hosts] = True

    base_load = host_loads(p, base)
    fixed_load = base_load.copy()
    np.subtract.at(fixed_load, base[free], p.demand[free])
    always_open = np.bincount(base[~is_free], minlength=p.n_hosts) > 0

    t_grid = np.repeat(free, len(model_hosts))
    h_grid = np.tile(model_hosts, len(free))
    enter = in_subset[h_grid]
    for rule in p.rules:
        enter &= rule.candidates(p, fixed_load, t_grid, h_grid)
    keep = enter | (h_grid == base[t_grid])
    pair_task, pair_host = t_grid[keep], h_grid[keep]
    task_start = np.append(np.searchsorted(pair_task, free, side="left"), len(pair_task))
    pair_current = pair_host == p.current[pair_task]
    can_stay = np.zeros(p.n_tasks, dtype=bool)
    can_stay[pair_task[pair_current]] = True
    fixed_moves = int((base[~is_free] != p.current[~is_free]).sum()) + int((~can_stay[free]).sum())
    return Formulation(
        problem=p, base=base, free=free, is_free=is_free, hosts=model_hosts, in_model=in_model,
        pair_task=pair_task, pair_host=pair_host, task_start=task_start, pair_base=pair_host == base[pair_task],
        pair_current=pair_current, always_open=always_open, slack=p.capacity + TOLERANCE - base_load, fixed_moves=fixed_moves,
    )


@dataclass
class Constraint:
    """``Σ coefs·vars (sense) rhs``, enforced where every ``enforce`` literal is true; ``kind``/``unit`` as in the module doc."""

    vars: np.ndarray
    coefs: np.ndarray
    sense: str
    rhs: float
    enforce: tuple[int, ...] = ()
    kind: str = "count"
    unit: str | None = None
    margin: float = 0.0


@dataclass
class ExactModel:
    """A linear model over the neighbourhood ``form`` (module doc). Variables are indices into the ``var_*`` lists."""

    form: Formulation
    var_kind: list[str] = field(default_factory=list)
    var_lb: list[float] = field(default_factory=list)
    var_ub: list[float] = field(default_factory=list)
    var_hint: list[float] = field(default_factory=list)
    var_unit: list[str | None] = field(default_factory=list)
    var_name: list[str] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    implications: list[tuple[int, int]] = field(default_factory=list)
    obj_vars: list[int] = field(default_factory=list)
    obj_coefs: list[float] = field(default_factory=list)
    constant: float = 0.0
    x: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _open: dict[int, int] = field(default_factory=dict)

    def _var(self, kind: str, lb: float, ub: float, name: str, hint: float, unit: str | None) -> int:
        self.var_kind.append(kind)
        self.var_lb.append(float(lb))
        self.var_ub.append(float(ub))
        self.var_hint.append(float(hint))
        self.var_unit.append(unit)
        self.var_name.append(name)
        return len(self.var_kind) - 1

    def bool_var(self, name: str, hint: bool = False) -> int:
        return self._var(BOOL, 0, 1, name, float(hint), None)

    def cont_var(self, lb: float, ub: float, name: str, hint: float = 0.0, unit: str = "objective") -> int:
        return self._var(CONT, lb, ub, name, hint, unit)

    @property
    def n_vars(self) -> int:
        return len(self.var_kind)

    def _add(self, variables, coefs, sense: str, rhs: float, enforce, kind: str, unit: str | None, margin: float = 0.0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown constraint kind {kind!r}")
        variables = np.asarray(variables, dtype=np.int64)
        coefs = np.asarray(coefs, dtype=float)
        if variables.shape != coefs.shape:
            raise ValueError("a constraint needs one coefficient per variable")
        self.constraints.append(Constraint(variables, coefs, sense, float(rhs), tuple(int(e) for e in enforce), kind,
                                           unit or ("objective" if kind == "objective" else None), float(margin)))

    def add_le(self, variables, coefs, rhs: float, enforce=(), kind: str = "count", unit: str | None = None, margin: float = 0.0) -> None:
        """``Σ coefs·variables ≤ rhs`` (where every ``enforce`` literal is true); the MILP backends keep ``margin`` below ``rhs``."""
        self._add(variables, coefs, "<=", rhs, enforce, kind, unit, margin)

    def add_ge(self, variables, coefs, rhs: float, enforce=(), kind: str = "count", unit: str | None = None, margin: float = 0.0) -> None:
        """``Σ coefs·variables ≥ rhs`` (where every ``enforce`` literal is true); the MILP backends keep ``margin`` above ``rhs``."""
        self._add(variables, coefs, ">=", rhs, enforce, kind, unit, margin)

    def add_eq(self, variables, coefs, rhs: float) -> None:
        """``Σ coefs·variables = rhs`` (a count constraint)."""
        self._add(variables, coefs, "==", rhs, (), "count", None)

    def implies(self, a: int, b: int) -> None:
        """Boolean ``a → b`` (``a ≤ b``). Kept apart from :attr:`constraints` because CP-SAT states it natively, far faster to build."""
        self.implications.append((int(a), int(b)))

    def objective(self, variables, coefs) -> None:
        """Add ``Σ coefs·variables`` to the objective (objective units)."""
        self.obj_vars.extend(int(v) for v in variables)
        self.obj_coefs.extend(float(c) for c in coefs)

    def open_var(self, h: int) -> int | None:
        """The variable "host ``h`` holds a free task" (created once; None when no pair may use ``h``)."""
        if h in self._open:
            return self._open[h]
        ids = self.form.pairs_by_host().get(int(h), [])
        if not ids:
            return None
        var = self.bool_var(f"open{h}", hint=bool(self.form.pair_base[ids].any()))
        for i in ids:
            self.implies(self.x[i], var)
        self.add_le(np.concatenate([[var], self.x[ids]]), np.concatenate([[1.0], -np.ones(len(ids))]), 0.0)
        self._open[h] = var
        return var

    def add_open_costs(self, costs: np.ndarray) -> None:
        """Add ``Σ_h costs[h]·occupied[h]`` (objective units): variables for the hosts the model decides, a constant for the others."""
        form = self.form
        self.constant += float(costs[~form.in_model & occupied(form.problem, form.base)].sum() + costs[form.in_model & form.always_open].sum())
        for h in form.model_hosts.tolist():
            var = self.open_var(h)
            if var is not None and costs[h] != 0:
                self.objective([var], [costs[h]])

    def hints(self) -> np.ndarray:
        return np.asarray(self.var_hint)


def build_exact_model(problem: PlacementProblem, base: np.ndarray | None = None, tasks: np.ndarray | None = None,
                      hosts: np.ndarray | None = None, max_changes: int | None = None) -> ExactModel:
    """The exact model of the neighbourhood (:func:`build_formulation`), with every rule that the exact strategy honours and every goal.

    Rules whose :attr:`~packer.rules.base.Rule.strategies` lack ``"exact"`` are left
    out (the caller checks them on the result: see the large-neighbourhood search).
    ``max_changes``: at most that many free tasks end on a host other than their ``base``
    one (local branching: a neighbourhood by distance from ``base``, not by hosts).
    """
    form = build_formulation(problem, base, tasks, hosts)
    model = ExactModel(form)
    model.x = np.array([model.bool_var(f"x{i}", hint=bool(b)) for i, b in enumerate(form.pair_base)], dtype=np.int64)
    for i in range(len(form.free)):
        pairs = model.x[form.task_start[i]:form.task_start[i + 1]]
        model.add_eq(pairs, np.ones(len(pairs)), 1.0)
    if max_changes is not None and len(form.free) > max_changes:
        stay = model.x[form.pair_base]
        model.add_ge(stay, np.ones(len(stay)), len(stay) - max_changes)
    for rule in problem.rules:
        if "exact" in rule.strategies:
            rule.add_to_model(model)
    for goal in problem.goals:
        goal.add_to_model(model)
    return model
