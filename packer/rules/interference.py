"""Interference (colocation paper, Eq. 4): the summed excess of normalized sensitivity over 1, a soft constraint.

Per host and sensitivity dimension k, ``S_k(h) = Σ_t sens_demand[t,k] / sens_capacity[h,k]``
(on the problem's sensitivity basis, :mod:`packer.characterization.normalize`); the term is
``weight · Σ_h Σ_k max(0, S_k(h) − 1)``. The weight is the TCO-vs-SLO knob
(``--sensitivity-weight``), in cost units per unit of excess.
"""
from __future__ import annotations

import math

import numpy as np

from packer.model.metrics import host_sensitivity
from packer.rules.base import Goal, SoftCapacity


class Interference(Goal):
    """``weight ·`` Σ_h Σ_k max(0, S_k(h) − 1) (module doc)."""

    name = "interference"
    term = "sensitivity"

    def value(self, problem, assign):
        if not problem.sens_dims:
            return 0.0
        return float(self.weight * np.clip(host_sensitivity(problem, assign) - 1.0, 0.0, None).sum())

    def delta(self, state, t, hosts):
        p = state.p
        if not p.sens_dims or self.weight == 0 or not p.sens_demand[t].any():
            return np.zeros(len(hosts))
        inv = state.inv_sens_cap
        # Gathered once: this runs for every candidate host of every task a construction places.
        sens, inv_hosts = state.sens.take(hosts, axis=0), inv.take(hosts, axis=0)
        before = np.clip(sens * inv_hosts - 1.0, 0.0, None).sum(axis=1)
        after = np.clip((sens + p.sens_demand[t]) * inv_hosts - 1.0, 0.0, None).sum(axis=1)
        out = after - before
        frm = int(state.assign[t])
        if frm >= 0:
            here = state.sens[frm] * inv[frm]
            out = out + (np.clip(here - p.sens_demand[t] * inv[frm] - 1.0, 0.0, None).sum() - np.clip(here - 1.0, 0.0, None).sum())
        return self.weight * out

    def soft_capacity(self, problem):
        """``weight · max(0, S_k(h) − 1)`` is ``weight / sens_capacity[h,k]`` per unit of sensitivity demand beyond ``sens_capacity[h,k]``.

        A host without a positive, finite sensitivity capacity in k gets no term (capacity ``inf``,
        price 0): less than the term, which such a host makes infinite or leaves out of the exact model.
        """
        if not problem.sens_dims or self.weight == 0:
            return None
        cap = problem.sens_capacity
        modelled = np.isfinite(cap) & (cap > 0)
        return SoftCapacity(demand=problem.sens_demand, capacity=np.where(modelled, cap, np.inf),
                            price=np.where(modelled, self.weight / np.where(modelled, cap, 1.0), 0.0))

    def add_to_model(self, model):
        """``excess[h,k] ≥ weight · (Σ_t use·x + fixed − 1)`` where the sum can exceed 1; the excess of hosts outside the model is constant."""
        form, p = model.form, model.form.problem
        if not p.sens_dims:
            return
        cap = p.sens_capacity
        modelled = np.isfinite(cap) & (cap > 0)
        safe = np.where(modelled, cap, 1.0)
        use = np.where(modelled[form.pair_host], p.sens_demand[form.pair_task] / safe[form.pair_host], 0.0)
        fixed = np.zeros((p.n_hosts, len(p.sens_dims)))
        np.add.at(fixed, form.base[~form.is_free], p.sens_demand[~form.is_free])
        fixed = np.where(modelled, fixed / safe, 0.0)
        reach = fixed.copy()
        np.add.at(reach, form.pair_host, use)
        outside = ~form.in_model
        if outside.any():
            model.constant += self.weight * float(np.clip(host_sensitivity(p, form.base)[outside] - 1.0, 0.0, None).sum())
        if self.weight == 0:
            return
        by_host = form.pairs_by_host()
        active = (reach > 1.0) & modelled & form.in_model[:, None]
        for h, k in zip(*np.nonzero(active)):
            ids = np.asarray(by_host.get(int(h), []), dtype=np.int64)
            upper = self.weight * (use[ids, k].sum() + fixed[h, k] - 1.0)
            if upper <= 0:
                continue
            start = self.weight * max(0.0, float(use[ids, k][form.pair_base[ids]].sum() + fixed[h, k] - 1.0))
            excess = model.cont_var(0.0, math.ceil(upper * 1e6) / 1e6, f"excess{h}_{k}", hint=start, unit="objective")
            # excess ≥ weight·(Σ use·x) + weight·(fixed − 1), stated as excess − Σ weight·use·x ≥ weight·(fixed − 1).
            model.add_ge(np.concatenate([[excess], model.x[ids]]), np.concatenate([[1.0], -self.weight * use[ids, k]]),
                         self.weight * (fixed[h, k] - 1.0), kind="objective")
            model.objective([excess], [1.0])
