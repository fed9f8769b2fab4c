"""Anti-affinity between services: tasks of service A and of service B do not share a host the plan gives them.

Operators keep some services apart (two replicas' dependencies, a noisy neighbour,
a licence): ``--anti-affinity A,B`` (repeatable, or a constraints file) lists such
pairs. Like spread, the rule holds where the plan *gains* tasks: a host that a moved
task of A or B lands on may not end with tasks of both A and B; a host that holds
both today and gains none of them keeps them (the current placement is always
valid). Tasks without a service are never constrained.
"""
from __future__ import annotations

import numpy as np

from packer.rules.base import Rule


class _Members:
    """Per pair: tasks of each side, and per host the tasks of each side placed there and how many of them moved there."""

    def __init__(self, state, sides: np.ndarray):
        p = state.p
        self.sides = sides
        placed = state.assign >= 0
        moved = placed & (state.assign != p.current)
        n_pairs = sides.shape[0]
        self.on = np.zeros((n_pairs, 2, p.n_hosts), dtype=np.int64)
        self.moved_in = np.zeros((n_pairs, p.n_hosts), dtype=np.int64)
        for q in range(n_pairs):
            for side in range(2):
                members = sides[q, side] & placed
                self.on[q, side] = np.bincount(state.assign[members], minlength=p.n_hosts)
                np.add.at(self.moved_in[q], state.assign[sides[q, side] & moved], 1)

    def update(self, state, t: int, h: int, sign: int) -> None:
        if h < 0:
            return
        moved = h != state.p.current[t]
        for q, side in zip(*np.nonzero(self.sides[:, :, t])):
            self.on[q, side, h] += sign
            if moved:
                self.moved_in[q, h] += sign


class AntiAffinity(Rule):
    """Tasks of the services of each pair do not end together on a host they gain (module doc).

    ``pairs``: (service A, service B) names; ``services`` (T,): each task's service
    (None or NaN for none), in the problem's task order. A pair naming the same service
    twice keeps that service's tasks apart from each other.
    """

    name = "anti-affinity"

    def __init__(self, pairs, services):
        self.pairs = tuple((str(a), str(b)) for a, b in pairs)
        if not self.pairs:
            raise ValueError("anti-affinity needs at least one pair of services")
        if services is None:
            raise ValueError("anti-affinity needs each task's service; the trace has no service column")
        names = np.asarray(services, dtype=object)
        # sides[q, 0/1, t]: task t is of pair q's first / second service.
        self.sides = np.array([[names == a, names == b] for a, b in self.pairs], dtype=bool).reshape(len(self.pairs), 2, len(names))
        self.same = np.array([a == b for a, b in self.pairs])

    def _together(self, on: np.ndarray) -> np.ndarray:
        """(Q, H) bool: hosts holding tasks of both services of each pair (two of one service for a same-service pair)."""
        return np.where(self.same[:, None], on[:, 0] >= 2, (on[:, 0] > 0) & (on[:, 1] > 0))

    def violations(self, problem, assign):
        moved = assign != problem.current
        on = np.stack([[np.bincount(assign[side], minlength=problem.n_hosts) for side in pair] for pair in self.sides])
        gained = np.stack([np.bincount(assign[(pair[0] | pair[1]) & moved], minlength=problem.n_hosts) > 0 for pair in self.sides])
        broken = self._together(on) & gained
        out = []
        for q in np.flatnonzero(broken.any(axis=1)):
            hosts = problem.host_ids[broken[q]]
            out.append(f"{len(hosts)} hosts hold tasks of both {self.pairs[q][0]} and {self.pairs[q][1]} after gaining one, "
                       f"e.g. {hosts[:5].tolist()}")
        return out

    def attach(self, state):
        return _Members(state, self.sides)

    def on_move(self, state, t, frm, to):
        members = state.tally[self]
        members.update(state, t, frm, -1)
        members.update(state, t, to, +1)

    def admits(self, state, t, hosts):
        members = state.tally[self]
        ok = np.ones(len(hosts), dtype=bool)
        gains = hosts != state.p.current[t]
        for q, side in zip(*np.nonzero(self.sides[:, :, t])):
            if self.same[q]:
                others = members.on[q, 0, hosts] - (hosts == state.assign[t])
            else:
                others = members.on[q, 1 - side, hosts]
            gained = gains | (members.moved_in[q, hosts] > 0)
            ok &= ~gained | (others == 0)
        return ok

    def add_to_model(self, model):
        """Per pair and host where both sides can end: ``a + b ≤ 1`` where a moved task of either side enters."""
        form, p = model.form, model.form.problem
        by_host = form.pairs_by_host()
        fixed = ~form.is_free
        fixed_moved = fixed & (form.base != p.current)
        for q, (pair_sides, same) in enumerate(zip(self.sides, self.same)):
            # Per host, the fixed tasks of each side on it, and whether a moved fixed task of the pair is there.
            fixed_on = [np.bincount(form.base[fixed & pair_sides[s]], minlength=p.n_hosts) for s in range(2)]
            forced_on = np.bincount(form.base[fixed_moved & (pair_sides[0] | pair_sides[1])], minlength=p.n_hosts) > 0
            for h, ids in by_host.items():
                ids = np.asarray(ids, dtype=np.int64)
                tasks = form.pair_task[ids]
                side_pairs = [ids[pair_sides[s][tasks]] for s in range(2)]
                side_fixed = [int(fixed_on[s][h]) for s in range(2)]
                gaining = ids[(pair_sides[0][tasks] | pair_sides[1][tasks]) & (form.pair_host[ids] != p.current[tasks])]
                forced = bool(forced_on[h])
                if not len(gaining) and not forced:
                    continue
                if same:
                    total = len(side_pairs[0]) + side_fixed[0]
                    if total < 2:
                        continue
                    limit, terms = 1 - side_fixed[0], side_pairs[0]
                    if len(terms) == 0 and limit >= 0:
                        continue
                    self._limit(model, f"aa{q}_{h}", terms, limit, gaining, forced)
                    continue
                if not ((len(side_pairs[0]) or side_fixed[0]) and (len(side_pairs[1]) or side_fixed[1])):
                    continue
                present = []
                for s in range(2):
                    if side_fixed[s]:
                        present.append(None)
                        continue
                    var = model.bool_var(f"aa{q}_{h}_{s}", hint=bool(form.pair_base[side_pairs[s]].any()))
                    for i in side_pairs[s]:
                        model.implies(model.x[i], var)
                    present.append(var)
                fixed_count = sum(v is None for v in present)
                variables = [v for v in present if v is not None]
                self._limit(model, f"aa{q}_{h}", np.asarray(variables, dtype=np.int64), 1 - fixed_count, gaining, forced, are_x=False)

    @staticmethod
    def _limit(model, name: str, terms: np.ndarray, limit: int, gaining: np.ndarray, forced: bool, are_x: bool = True) -> None:
        """``Σ terms ≤ limit`` where the host gains a task of the pair (always when a fixed task already gained it)."""
        variables = model.x[terms] if are_x else terms
        enforce = ()
        if not forced:
            gain = model.bool_var(f"{name}_gain", hint=False)
            for i in gaining:
                model.implies(model.x[i], gain)
            enforce = (gain,)
        model.add_le(variables, np.ones(len(variables)), limit, enforce=enforce)

    def describe(self):
        return {"rule": self.name, "pairs": [list(pair) for pair in self.pairs]}
