"""Capacity: per host and dimension, the summed demand stays within capacity.

A host already over capacity in the current placement may keep its load as long as
it receives no new task (the plan does not make it worse); every other host ends
within ``capacity + TOLERANCE`` (:data:`packer.model.metrics.TOLERANCE`) in every
dimension. Demand and capacity are in the problem's dimension units.
"""
from __future__ import annotations

import math

import numpy as np

from packer.model.metrics import TOLERANCE, fits_within, host_loads, initially_overloaded
from packer.rules.base import Rule


class Capacity(Rule):
    """Summed demand ≤ capacity per host and dimension (module doc)."""

    name = "capacity"

    def violations(self, problem, assign):
        moved = assign != problem.current
        gained = np.zeros(problem.n_hosts, dtype=bool)
        gained[assign[moved]] = True
        over = host_loads(problem, assign) > problem.capacity + TOLERANCE
        over_hosts = over.any(axis=1) & (gained | ~initially_overloaded(problem))
        if not over_hosts.any():
            return []
        h = np.flatnonzero(over_hosts)
        dims = [problem.dims[j] for j in np.flatnonzero(over[h[0]])]
        return [f"{len(h)} hosts over capacity, e.g. {problem.host_ids[h[0]]} in {', '.join(dims)}"]

    def admits(self, state, t, hosts):
        p = state.p
        receiving = np.flatnonzero(state.receiver[hosts] | (hosts == p.current[t]))  # only these are checked
        admitted = np.zeros(len(hosts), dtype=bool)
        admitted[receiving[fits_within(state.loads, p.demand[t], state.cap, hosts[receiving])]] = True
        return admitted

    def candidates(self, problem, fixed_load, pair_task, pair_host):
        # Back to its host of today is no gain for the host, whatever its load (the model's constraints decide).
        fits = (problem.demand[pair_task] <= problem.capacity[pair_host] + TOLERANCE - fixed_load[pair_host]).all(axis=1)
        return fits | (pair_host == problem.current[pair_task])

    def add_to_model(self, model):
        """Per host and dimension, the load change against the base within the slack. A host over capacity today keeps
        its load unless it gains a task: a task that is not on it today (``gain`` flag), whatever the base holds.

        The flag follows today's placement, not the base: from a base that moved a task off such a host, the task may
        go back without the host having to fit, as :meth:`violations` allows.
        """
        form, p = model.form, model.form.problem
        over_today = initially_overloaded(p)
        fixed = ~form.is_free
        gained_by_fixed = np.zeros(p.n_hosts, dtype=bool)
        gained_by_fixed[form.base[fixed & (form.base != p.current)]] = True
        for h, ids in form.pairs_by_host().items():
            ids = np.asarray(ids, dtype=np.int64)
            entering = ids[~form.pair_base[ids]]
            if len(entering) == 0:
                continue
            staying = ids[form.pair_base[ids]]
            gainers = ids[~form.pair_current[ids]]
            conditional = bool(over_today[h] and not gained_by_fixed[h])
            if conditional and len(gainers) == 0:  # nothing can gain it: its load can only fall
                continue
            gain = None
            for d in range(len(p.dims)):
                slack = form.slack[h, d]
                if not math.isfinite(slack) or p.demand[form.pair_task[entering], d].sum() <= slack:
                    continue
                enforce = ()
                if conditional:
                    if gain is None:
                        gain = model.bool_var(f"gain{h}", hint=bool(form.pair_base[gainers].any()))
                        for i in gainers:
                            model.implies(model.x[i], gain)
                    enforce = (gain,)
                ids_all = np.concatenate([entering, staying])
                model.add_le(model.x[ids_all], p.demand[form.pair_task[ids_all], d], slack + p.demand[form.pair_task[staying], d].sum(),
                             enforce=enforce, kind="physical", unit=f"dim{d}", margin=TOLERANCE / 2)
