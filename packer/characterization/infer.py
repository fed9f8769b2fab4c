"""Infer missing sensitivity scores by collaborative filtering (Paragon §3 / Quasar §3).

Most tasks are never profiled on every architecture. As in Paragon and Quasar, a
utility matrix has one row per workload and one column per (architecture,
dimension) sensitivity score; a few rows are profiled densely (the offline
training set) and every other row has one or two measured entries. The missing
entries are reconstructed from similarities between rows.

Model (Quasar §3, with a column bias added as in the Netflix-prize model it cites)::

    r̂_ui = μ + b_u + b_i + q_i · p_u

minimizing, over the observed entries, ``Σ (r_ui − r̂_ui)² + λ(‖q_i‖² + ‖p_u‖² + b_u² + b_i²)``.
Quasar prints the error as ``ε_ui = r_ui − μ − b_u − q_i·p_u`` (global mean and a
row bias only); the column bias ``b_i`` is the issue's "row/column biases" and is
what absorbs the per-(architecture, dimension) scale of Eq. 1 below.

How the fit runs, in order:

1. **Transform.** By default scores are fitted in log space (``transform="log"``).
   Eq. 1 of the colocation paper makes a score on architecture A the measured
   score times a per-(architecture, dimension) constant ``g_k(M)/g_k(A)``; in log
   space that constant is exactly a column bias, and "task X is 20% more sensitive
   than its class" is a row bias. Errors then are relative errors, which suits
   scores that span 0.1–2. ``transform="identity"`` fits raw scores (needed when a
   score can be 0 or negative).
2. **Baseline.** μ = mean of the observed entries; ``b_i`` then ``b_u`` = ridge means
   of the residuals (the minimizers of the bias-only model under the same λ).
3. **SVD initialization** (Paragon §2.1: ``Q = U``, ``Pᵀ = ΣVᵀ``). The bias-removed
   matrix with missing entries set to 0 (= imputed with the baseline) is factored
   with ``numpy.linalg.svd``; the top ``rank`` singular triplets give
   ``p_u = U√Σ`` and ``q_i = V√Σ``. Paragon puts all of Σ on one side; the product
   (the initial reconstruction) is the same, and the balanced split gives both
   factor sets the same scale, which one learning rate needs.
4. **SGD** (Quasar's updates plus the two bias updates)::

       ε = r_ui − μ − b_u − b_i − q_i·p_u
       b_u ← b_u + η(ε − λ b_u)          b_i ← b_i + η(ε − λ b_i)
       q_i ← q_i + η(ε p_u − λ q_i)      p_u ← p_u + η(ε q_i − λ p_u)

   over shuffled mini-batches of ``batch_size`` entries: all updates of a batch are
   computed from the parameters at the start of the batch and summed
   (``np.add.at``/``np.bincount``), so an epoch is a few hundred NumPy operations,
   not a Python loop over entries. Quasar applies λ at every visit of an entry,
   which penalizes a column with n_i entries n_i times: with 37,000 rows that
   shrank the column factors to nothing (training RMSE rose from the SVD start).
   Here a visit applies ``λ/n_i`` (columns) and ``λ/n_u`` (rows), so an epoch
   applies each penalty once, as in the objective above. μ stays the global mean.
   Stops when the training RMSE fell by less than ``tol`` (relative) per epoch,
   averaged over the last 5 epochs ("until |ε| becomes marginal"), or after
   ``max_epochs``. If the RMSE blows up (non-finite or 1.5× its start), SGD
   restarts from the SVD initialization with η halved (logged; ``learning_rate_``).

5. **Fold-in** (what Paragon does for a new workload). With the columns (μ, b_i,
   q_i) fixed, each row's (b_u, p_u) is solved in closed form — a batched
   ``(r+1)×(r+1)`` ridge solve per row. SGD alone serves sparse rows badly: a row
   with two entries gets two tiny updates per epoch and would need hundreds of
   epochs to converge, while the fold-in gives the exact minimizer at once.
   With ``fold_in_prior="empirical"`` (default) the penalty ``λ(b_u² + ‖p_u‖²)``
   is generalized to a Gaussian prior fitted on the well-determined rows (those
   with at least ``rank + 3`` observed entries): ``σ²(θ − m)ᵀ C⁻¹ (θ − m)`` with
   ``θ = (b_u, p_u)``, ``m``/``C`` the mean/covariance of their θ and ``σ²`` their
   mean squared residual. A row with fewer entries than parameters is
   underdetermined, so the penalty *is* the answer in its unobserved directions;
   an isotropic λ treats every similarity concept alike although their spread
   across workloads differs by σ₁/σ_r. ``fold_in_prior="ridge"`` keeps Quasar's
   isotropic λ exactly; it is also the fallback when fewer than ``rank + 2``
   well-determined rows exist.

Parameters chosen (defaults) and why — all on log-scores, measured on the
synthetic Eq.-1-shaped data of ``benchmarks/bench_infer.py`` (scenario "shared",
2,000 rows, mean absolute error of the inferred entries at 2 / 4 measured entries
per row):

- ``rank=3``: sensitivity has three dimensions (cpu, membw, net) and Eq. 1 makes
  scores of one dimension proportional across architectures, so three similarity
  concepts span the class structure. Rank 2 was 9% / 40% worse, rank 4 0% / 4% worse.
- ``regularization=0.01`` (λ): 0.1 gave the same error, 1.0 was 0.5% / 10% worse
  (37,000 rows: 6% / 17% worse); the empirical-prior fold-in makes the result
  insensitive to small λ.
- ``learning_rate=0.02`` (η), ``batch_size=1024``: η = 0.05 diverged (a column's
  step per batch is the sum over its ~batch/n_cols entries); η = 0.005 converged
  too slowly (6% worse at 4 entries after 100 epochs).
- ``max_epochs=100``, ``tol=1e-4``: the columns keep improving for ~40 epochs at
  2,000 rows (4-entry error 0.0669 after 10 epochs, 0.0592 after 40, 0.0571 after
  100) and ~20 at 37,000. The training RMSE keeps falling past that (sparse rows
  fit their two entries exactly), so in these runs ``max_epochs`` is what stops
  SGD; the held-out error is flat there, and the fold-in finishes the rows.

Confidence. ``expected_error_`` is each filled entry's expected absolute error
(score units), estimated by held-out calibration on the rows that have the most
measurements: for k = 0, 1, … entries kept per row, k observed entries of each
calibration row (up to ``calibration_rows``) are kept at random, the rest are
predicted by the fold-in, and the mean relative error per (k, column) is
recorded. A filled entry of a row with k observed entries gets that relative
error times its value. ``confidence_ = clip(1 − expected relative error, 0, 1)``:
1 for a measured entry, 0.9 for "expected within ~10%". The calibration rows
also helped fit the columns, which biases the estimate low, while the few dense
rows make it noisy; in ``benchmarks/bench_infer.py`` the mean estimate was
between 7% below and 30% above the actual mean error (it prints both).

Rows with no observed entry cannot be inferred. They are reported (a warning and
``empty_rows_``) and get the mean of the filled rows of their group when
``groups`` (e.g. workload classes) is given, else the column means of the filled
rows; their confidence is the k = 0 calibration (the error of predicting the
average row for every row), which is low.
"""
from __future__ import annotations

import logging
from typing import Hashable, Sequence

import numpy as np
import pandas as pd

from packer.errors import MAX_ROWS_SHOWN, InputError, Problem

log = logging.getLogger(__name__)

TRANSFORMS = ("log", "identity")
FOLD_IN_PRIORS = ("empirical", "ridge")
#: A row is "well determined" (feeds the empirical prior) with this many entries beyond its rank.
_EXTRA_ENTRIES_FOR_PRIOR = 3
#: SGD counts as diverged when the training RMSE exceeds this multiple of its start.
_DIVERGED = 1.5
#: The stopping rule averages the relative change of the training RMSE over this many epochs.
_STOP_WINDOW = 5
#: How often a diverging SGD is restarted with half the learning rate before it is skipped.
_MAX_HALVINGS = 10
#: Keeps the prior covariance invertible when a factor never varies.
_COVARIANCE_JITTER = 1e-9


class ScoreInference:
    """Collaborative-filtering completion of a workloads × (architecture, dimension) score matrix.

    Scikit-learn style: ``ScoreInference(...).fit(matrix)`` then :meth:`fill`
    (measured entries kept, missing ones inferred), :meth:`predict` (the model's
    reconstruction everywhere), ``confidence_`` and ``expected_error_``. Scores
    are unitless sensitivity scores (fractions of a host's resource); outputs are
    in the same units. See the module docstring for the method and the defaults.

    Fitted attributes: ``mu_`` (global mean), ``row_bias_`` (n_rows),
    ``column_bias_`` (n_cols), ``row_factors_`` (n_rows × rank), ``column_factors_``
    (n_cols × rank) — all in the transformed space; ``n_epochs_``,
    ``train_rmse_`` (transformed space, observed entries), ``empty_rows_`` (indices
    of rows with no observed entry), ``observed_counts_`` (entries per row),
    ``calibration_`` (expected relative error, shape (k, n_cols)),
    ``expected_error_`` and ``confidence_`` (n_rows × n_cols).
    """

    def __init__(
        self,
        rank: int = 3,
        learning_rate: float = 0.02,
        regularization: float = 0.01,
        max_epochs: int = 100,
        tol: float = 1e-4,
        batch_size: int = 1024,
        transform: str = "log",
        fold_in_prior: str = "empirical",
        calibration_rows: int = 1000,
        seed: int = 0,
    ):
        self.rank = rank
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.max_epochs = max_epochs
        self.tol = tol
        self.batch_size = batch_size
        self.transform = transform
        self.fold_in_prior = fold_in_prior
        self.calibration_rows = calibration_rows
        self.seed = seed

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        matrix: np.ndarray,
        groups: Sequence[Hashable] | np.ndarray | None = None,
        *,
        row_names: Sequence[Hashable] | None = None,
        column_names: Sequence[Hashable] | None = None,
        source: str = "scores",
    ) -> "ScoreInference":
        """Fit on a dense ``n_rows × n_cols`` float array with NaN for missing scores.

        ``groups`` (optional, one label per row, e.g. the workload class) only
        decides what rows with no observed entry get. ``row_names``/``column_names``/
        ``source`` name rows, columns and file in error messages. Raises
        :class:`InputError` on non-finite or (log transform) non-positive scores,
        columns with no observed entry, or bad parameters.
        """
        values = np.asarray(matrix, dtype=float)
        if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
            raise InputError(f"{source}: expected a non-empty 2-D matrix of scores, got shape {values.shape}")
        rows, cols = np.nonzero(~np.isnan(values))
        return self.fit_entries(
            rows, cols, values[rows, cols], values.shape, groups,
            row_names=row_names, column_names=column_names, source=source,
        )

    def fit_entries(
        self,
        rows: np.ndarray,
        cols: np.ndarray,
        values: np.ndarray,
        shape: tuple[int, int],
        groups: Sequence[Hashable] | np.ndarray | None = None,
        *,
        row_names: Sequence[Hashable] | None = None,
        column_names: Sequence[Hashable] | None = None,
        source: str = "scores",
    ) -> "ScoreInference":
        """Fit on observed entries given as coordinate arrays (row index, column index, score).

        Same as :meth:`fit` otherwise; duplicate or out-of-range coordinates raise
        :class:`InputError`.
        """
        n_rows, n_cols = (int(s) for s in shape)
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        values = np.asarray(values, dtype=float)
        row_names = list(range(n_rows)) if row_names is None else list(row_names)
        column_names = list(range(n_cols)) if column_names is None else list(column_names)
        self._check_parameters(n_cols)
        _check_entries(rows, cols, values, n_rows, n_cols, self.transform, row_names, column_names, source)
        group_labels = None
        if groups is not None:
            group_labels = np.asarray(groups, dtype=object)
            if group_labels.shape != (n_rows,):
                raise InputError(f"{source}: groups has {group_labels.size} labels for {n_rows} rows")

        y = np.log(values) if self.transform == "log" else values.copy()
        lam = self.regularization
        self.observed_counts_ = np.bincount(rows, minlength=n_rows)
        self.empty_rows_ = np.flatnonzero(self.observed_counts_ == 0)
        if self.empty_rows_.size:
            shown = ", ".join(repr(row_names[i]) for i in self.empty_rows_[:MAX_ROWS_SHOWN])
            log.warning(
                "%s: %d row(s) have no measured score and get %s means with low confidence; first: %s",
                source, self.empty_rows_.size, "group" if group_labels is not None else "column", shown,
            )

        mu, row_bias, column_bias = _baseline(rows, cols, y, n_rows, n_cols, lam)
        row_factors, column_factors = _svd_init(rows, cols, y - mu - row_bias[rows] - column_bias[cols], n_rows, n_cols, self.rank)
        row_bias, column_bias, row_factors, column_factors = self._run_sgd(
            rows, cols, y, mu, row_bias, column_bias, row_factors, column_factors)
        prior_mean, prior_precision = self._fold_in_prior(rows, cols, y, n_rows, mu, column_bias, column_factors)
        row_bias, row_factors = _fold_in(rows, cols, y, n_rows, mu, column_bias, column_factors, prior_mean, prior_precision)
        log.info("score inference: %d rows, %d columns, %d observed, %d epochs, training RMSE %.4g (%s space)",
                 n_rows, n_cols, y.size, self.n_epochs_, self.train_rmse_, self.transform)

        self.mu_ = mu
        self.row_bias_, self.column_bias_ = row_bias, column_bias
        self.row_factors_, self.column_factors_ = row_factors, column_factors
        self._prior = (prior_mean, prior_precision)
        self._observed = (rows, cols, values)
        self._groups = group_labels
        self.calibration_ = self._calibrate(rows, cols, y, n_rows, n_cols)
        self._set_confidence()
        return self

    def _run_sgd(self, rows, cols, y, mu, *initial: np.ndarray) -> tuple[np.ndarray, ...]:
        """SGD from the SVD initialization, halving η and restarting while it diverges.

        Sets ``learning_rate_`` (the η used), ``n_epochs_`` and ``train_rmse_``.
        """
        eta = self.learning_rate
        for _ in range(_MAX_HALVINGS + 1):
            params = tuple(p.copy() for p in initial)
            with np.errstate(over="ignore", invalid="ignore"):
                outcome = _sgd(rows, cols, y, mu, *params, eta, self.regularization, self.max_epochs, self.tol,
                               self.batch_size, np.random.default_rng(self.seed))
            if outcome is not None:
                self.learning_rate_ = eta
                self.n_epochs_, self.train_rmse_ = outcome
                return params
            log.warning("SGD diverged with learning rate %g; restarting from the SVD initialization with %g", eta, eta / 2)
            eta /= 2
        log.warning("SGD diverged %d times; keeping the SVD initialization", _MAX_HALVINGS + 1)
        self.learning_rate_, self.n_epochs_ = 0.0, 0
        row_bias, column_bias, row_factors, column_factors = initial
        error = y - mu - row_bias[rows] - column_bias[cols] - np.einsum("ij,ij->i", row_factors[rows], column_factors[cols])
        self.train_rmse_ = float(np.sqrt(np.mean(error ** 2)))
        return initial

    def _check_parameters(self, n_cols: int) -> None:
        problems = []
        if not (isinstance(self.rank, (int, np.integer)) and 1 <= self.rank < n_cols):
            problems.append(f"rank must be an integer in [1, {n_cols - 1}] (fewer than the {n_cols} columns), got {self.rank!r}")
        for name in ("learning_rate", "regularization", "tol"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                problems.append(f"{name} must be a positive number, got {value!r}")
        for name in ("max_epochs", "batch_size", "calibration_rows"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if self.transform not in TRANSFORMS:
            problems.append(f"transform must be one of {TRANSFORMS}, got {self.transform!r}")
        if self.fold_in_prior not in FOLD_IN_PRIORS:
            problems.append(f"fold_in_prior must be one of {FOLD_IN_PRIORS}, got {self.fold_in_prior!r}")
        if problems:
            raise InputError([Problem("ScoreInference", "", p, 0) for p in problems])

    def _fold_in_prior(self, rows, cols, y, n_rows, mu, column_bias, column_factors) -> tuple[np.ndarray, np.ndarray]:
        """Prior mean and precision of θ = (b_u, p_u) for the fold-in (see module docstring, step 5)."""
        dim = self.rank + 1
        ridge = (np.zeros(dim), self.regularization * np.eye(dim))
        if self.fold_in_prior == "ridge":
            return ridge
        bias, factors = _fold_in(rows, cols, y, n_rows, mu, column_bias, column_factors, *ridge)
        well_determined = np.bincount(rows, minlength=n_rows) >= self.rank + _EXTRA_ENTRIES_FOR_PRIOR
        if well_determined.sum() < dim + 1:
            log.warning("only %d rows have >= %d measured scores; using the ridge prior (lambda=%g) for the fold-in",
                        well_determined.sum(), self.rank + _EXTRA_ENTRIES_FOR_PRIOR, self.regularization)
            return ridge
        theta = np.column_stack([bias, factors])[well_determined]
        residual = y - mu - bias[rows] - column_bias[cols] - np.einsum("ij,ij->i", factors[rows], column_factors[cols])
        noise = max(float(np.mean(residual[well_determined[rows]] ** 2)), _COVARIANCE_JITTER)
        covariance = np.cov(theta, rowvar=False) + _COVARIANCE_JITTER * np.eye(dim)
        return theta.mean(axis=0), noise * np.linalg.inv(covariance)

    def _calibrate(self, rows, cols, y, n_rows, n_cols) -> np.ndarray:
        """Expected relative error per (entries kept k, column) from held-out observed entries."""
        rng = np.random.default_rng(self.seed)
        counts = np.bincount(rows, minlength=n_rows)
        # The rows with the most measurements hold out the most entries: take the top ones.
        candidates = np.flatnonzero(counts >= 2)
        if candidates.size == 0:
            log.warning("no row has two measured scores: confidence cannot be calibrated and is set to 0")
            return np.ones((1, n_cols))
        order = np.lexsort((rng.random(candidates.size), -counts[candidates]))
        chosen = candidates[order[: self.calibration_rows]]
        local = np.full(n_rows, -1)
        local[chosen] = np.arange(chosen.size)
        keep = local[rows] >= 0
        c_rows, c_cols, c_y = local[rows[keep]], cols[keep], y[keep]
        # Random rank of each entry within its row: "keep k" = keep entries ranked below k.
        by_row = np.lexsort((rng.random(c_rows.size), c_rows))
        starts = np.searchsorted(c_rows[by_row], np.arange(chosen.size))
        position = np.empty(c_rows.size, dtype=np.int64)
        position[by_row] = np.arange(c_rows.size) - starts[c_rows[by_row]]
        truth = self._inverse(c_y)

        max_kept = int(counts[chosen].max()) - 1
        errors = np.full((max_kept + 1, n_cols), np.nan)
        prior_mean, prior_precision = self._prior
        for kept in range(max_kept + 1):
            train, held = position < kept, position >= kept
            bias, factors = _fold_in(c_rows[train], c_cols[train], c_y[train], chosen.size, self.mu_,
                                     self.column_bias_, self.column_factors_, prior_mean, prior_precision)
            h_rows, h_cols = c_rows[held], c_cols[held]
            estimate = self._inverse(self.mu_ + bias[h_rows] + self.column_bias_[h_cols]
                                     + np.einsum("ij,ij->i", factors[h_rows], self.column_factors_[h_cols]))
            relative = np.abs(estimate - truth[held]) / np.maximum(np.abs(truth[held]), np.finfo(float).tiny)
            total = np.bincount(h_cols, relative, minlength=n_cols)
            samples = np.bincount(h_cols, minlength=n_cols)
            with np.errstate(invalid="ignore"):
                errors[kept] = np.where(samples > 0, total / np.maximum(samples, 1), relative.mean())
        return errors

    def _set_confidence(self) -> None:
        rows, cols, _ = self._observed
        kept = np.minimum(self.observed_counts_, self.calibration_.shape[0] - 1)
        relative = self.calibration_[kept]
        filled = self.fill()
        relative[rows, cols] = 0.0
        self.expected_error_ = relative * np.abs(filled)
        self.confidence_ = np.clip(1.0 - relative, 0.0, 1.0)

    # --------------------------------------------------------------- outputs
    def _inverse(self, y: np.ndarray) -> np.ndarray:
        return np.exp(y) if self.transform == "log" else y

    def predict(self) -> np.ndarray:
        """The model's reconstruction ``μ + b_u + b_i + q_i·p_u`` of every entry, in score units.

        Rows with no observed entry get group (or column) means of the other rows.
        """
        estimate = self._inverse(self.mu_ + self.row_bias_[:, None] + self.column_bias_[None, :]
                                 + self.row_factors_ @ self.column_factors_.T)
        empty = self.empty_rows_
        if empty.size == 0 or empty.size == estimate.shape[0]:
            return estimate
        informed = np.ones(estimate.shape[0], dtype=bool)
        informed[empty] = False
        # Means of the filled rows: measured scores where a row has them.
        filled = estimate.copy()
        rows, cols, values = self._observed
        filled[rows, cols] = values
        estimate[empty] = filled[informed].mean(axis=0)
        if self._groups is not None:
            codes, labels = pd.factorize(pd.Series(self._groups), use_na_sentinel=False)
            sums = np.zeros((labels.size, estimate.shape[1]))
            np.add.at(sums, codes[informed], filled[informed])
            members = np.bincount(codes[informed], minlength=labels.size)
            has_members = empty[members[codes[empty]] > 0]
            estimate[has_members] = sums[codes[has_members]] / members[codes[has_members], None]
        return estimate

    def fill(self) -> np.ndarray:
        """The completed matrix (score units): measured entries as given, missing ones inferred."""
        filled = self.predict()
        rows, cols, values = self._observed
        filled[rows, cols] = values
        return filled


def infer_scores(
    frame: pd.DataFrame,
    groups: pd.Series | None = None,
    source: str = "scores",
    **params,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill the missing scores of ``frame`` (rows = workloads, columns = (arch, dim), NaN = missing).

    Returns ``(filled, confidence)``, both shaped and labelled like ``frame``:
    measured scores are kept, missing ones inferred (unitless sensitivity scores);
    ``confidence`` is 1 for measured entries and ``1 − expected relative error``
    (clipped to [0, 1]) for inferred ones. ``groups`` (aligned on ``frame.index``,
    e.g. workload classes) decides what rows with no measured score get.
    ``params`` go to :class:`ScoreInference`.
    """
    non_numeric = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise InputError([Problem(source, str(c), "scores must be numbers", 0) for c in non_numeric[:MAX_ROWS_SHOWN]])
    group_values = None
    if groups is not None:
        aligned = groups.reindex(frame.index)
        missing = aligned.isna().to_numpy() & ~frame.index.isin(groups.index)
        if missing.any():
            raise InputError([Problem(source, "groups", "rows have no group label", int(missing.sum()),
                                      tuple(repr(i) for i in frame.index[missing][:MAX_ROWS_SHOWN]))])
        group_values = aligned.to_numpy(dtype=object)
    model = ScoreInference(**params).fit(
        frame.to_numpy(dtype=float), group_values,
        row_names=list(frame.index), column_names=list(frame.columns), source=source,
    )
    filled = pd.DataFrame(model.fill(), index=frame.index, columns=frame.columns)
    confidence = pd.DataFrame(model.confidence_, index=frame.index, columns=frame.columns)
    return filled, confidence


# ------------------------------------------------------------------ internals
def _check_entries(rows, cols, values, n_rows, n_cols, transform, row_names, column_names, source) -> None:
    """Raise one :class:`InputError` listing every problem with the observed entries."""
    if n_rows < 1 or n_cols < 1:
        raise InputError(f"{source}: expected at least one row and one column, got shape ({n_rows}, {n_cols})")
    if not (rows.shape == cols.shape == values.shape and rows.ndim == 1):
        raise InputError(f"{source}: rows, cols and values must be 1-D arrays of the same length")
    if len(row_names) != n_rows or len(column_names) != n_cols:
        raise InputError(f"{source}: {len(row_names)} row names / {len(column_names)} column names for shape ({n_rows}, {n_cols})")
    outside = (rows < 0) | (rows >= n_rows) | (cols < 0) | (cols >= n_cols)
    if outside.any():
        raise InputError([Problem(source, "", f"entries outside the {n_rows}x{n_cols} matrix", int(outside.sum()),
                                  tuple(f"({r}, {c})" for r, c in zip(rows[outside][:MAX_ROWS_SHOWN], cols[outside][:MAX_ROWS_SHOWN])))])
    flat = rows * n_cols + cols
    unique, counts = np.unique(flat, return_counts=True)
    if (counts > 1).any():
        dup = unique[counts > 1]
        raise InputError([Problem(source, "", "entries given more than once", int(dup.size),
                                  tuple(f"({row_names[d // n_cols]!r}, {column_names[d % n_cols]!r})" for d in dup[:MAX_ROWS_SHOWN]))])

    problems = []
    rules = [(~np.isfinite(values), "scores must be finite numbers (NaN marks a missing score)")]
    if transform == "log":
        rules.append((np.isfinite(values) & (values <= 0),
                      "scores must be > 0 for transform='log'; use transform='identity' for zero or negative scores"))
    for bad, message in rules:
        if not bad.any():
            continue
        bad_cols = cols[bad]
        for col in np.unique(bad_cols):
            in_col = bad & (cols == col)
            shown = tuple(f"row {row_names[r]!r} ({float(values[j])!r})"
                          for j, r in zip(np.flatnonzero(in_col)[:MAX_ROWS_SHOWN], rows[in_col][:MAX_ROWS_SHOWN]))
            problems.append(Problem(source, str(column_names[col]), message, int(in_col.sum()), shown))
    observed_per_col = np.bincount(cols, minlength=n_cols)
    for col in np.flatnonzero(observed_per_col == 0):
        problems.append(Problem(source, str(column_names[col]),
                                "no workload has a measured score in this column; it cannot be inferred", 0))
    if problems:
        raise InputError(problems)


def _baseline(rows, cols, y, n_rows, n_cols, lam) -> tuple[float, np.ndarray, np.ndarray]:
    """μ and ridge-mean biases: ``b_i = Σ(y−μ)/(n_i+λ)``, then ``b_u = Σ(y−μ−b_i)/(n_u+λ)``."""
    mu = float(y.mean())
    column_bias = np.bincount(cols, y - mu, minlength=n_cols) / (np.bincount(cols, minlength=n_cols) + lam)
    row_bias = np.bincount(rows, y - mu - column_bias[cols], minlength=n_rows) / (np.bincount(rows, minlength=n_rows) + lam)
    return mu, row_bias, column_bias


def _svd_init(rows, cols, residual, n_rows, n_cols, rank) -> tuple[np.ndarray, np.ndarray]:
    """Balanced rank-``rank`` SVD factors of the residual matrix (missing entries = 0).

    The matrix is tall (thousands of workloads, a few dozen columns), so its right
    singular vectors and values come from the eigendecomposition of the small
    ``n_cols × n_cols`` Gram matrix, and ``U√Σ = A V / √Σ`` — the same factors as
    ``numpy.linalg.svd`` for the top singular values, an order of magnitude faster.
    """
    dense = np.zeros((n_rows, n_cols))
    dense[rows, cols] = residual
    eigenvalues, eigenvectors = np.linalg.eigh(dense.T @ dense)
    top = np.argsort(eigenvalues)[::-1][:rank]
    singular = np.sqrt(np.maximum(eigenvalues[top], 0.0))
    v = eigenvectors[:, top]
    root = np.sqrt(singular)
    with np.errstate(divide="ignore", invalid="ignore"):
        row_factors = np.where(root > 0, (dense @ v) / root, 0.0)
    return row_factors, v * root


def _sgd(rows, cols, y, mu, row_bias, column_bias, row_factors, column_factors,
         eta, lam, max_epochs, tol, batch_size, rng) -> tuple[int, float] | None:
    """Mini-batch SGD in place on the biases and factors.

    Returns (epochs run, final training RMSE), or None when the step diverged
    (training RMSE non-finite or above :data:`_DIVERGED` times its start).
    """
    def rmse() -> float:
        error = y - mu - row_bias[rows] - column_bias[cols] - np.einsum("ij,ij->i", row_factors[rows], column_factors[cols])
        return float(np.sqrt(np.mean(error ** 2)))

    # λ per visit = λ / (the parameter's number of entries): one epoch then applies each
    # penalty once, as in the objective (see the module docstring, step 4).
    row_lam = lam / np.maximum(np.bincount(rows, minlength=row_bias.size), 1)
    column_lam = lam / np.maximum(np.bincount(cols, minlength=column_bias.size), 1)
    history = [rmse()]
    for epoch in range(1, max_epochs + 1):
        order = rng.permutation(y.size)
        for start in range(0, y.size, batch_size):
            batch = order[start:start + batch_size]
            u, i = rows[batch], cols[batch]
            p, q = row_factors[u], column_factors[i]
            lam_u, lam_i = row_lam[u], column_lam[i]
            error = y[batch] - mu - row_bias[u] - column_bias[i] - np.einsum("ij,ij->i", p, q)
            np.add.at(row_bias, u, eta * (error - lam_u * row_bias[u]))
            np.add.at(row_factors, u, eta * (error[:, None] * q - lam_u[:, None] * p))
            # Few columns: per-column bincounts are cheaper than np.add.at.
            column_bias += np.bincount(i, eta * (error - lam_i * column_bias[i]), minlength=column_bias.size)
            step = eta * (error[:, None] * p - lam_i[:, None] * q)
            for k in range(column_factors.shape[1]):
                column_factors[:, k] += np.bincount(i, step[:, k], minlength=column_bias.size)
        current = rmse()
        if not np.isfinite(current) or current > _DIVERGED * history[0]:
            return None
        log.debug("SGD epoch %d: training RMSE %.6g", epoch, current)
        history.append(current)
        # One epoch's change is noisy (an epoch can stall before the RMSE falls again), so
        # the rule compares against the RMSE _STOP_WINDOW epochs back.
        if epoch >= _STOP_WINDOW and history[-1 - _STOP_WINDOW] - current <= tol * _STOP_WINDOW * history[-1 - _STOP_WINDOW]:
            return epoch, current
    return max_epochs, history[-1]


def _fold_in(rows, cols, y, n_rows, mu, column_bias, column_factors, prior_mean, prior_precision) -> tuple[np.ndarray, np.ndarray]:
    """Per-row closed-form (b_u, p_u) with the columns fixed, all rows in one batched solve.

    Minimizes ``Σ_i (y_ui − μ − b_i − x_i·θ)² + (θ − m)ᵀ Λ (θ − m)`` with
    ``x_i = (1, q_i)`` and ``θ = (b_u, p_u)``; a row with no entries gets ``θ = m``.
    """
    dim = column_factors.shape[1] + 1
    features = np.column_stack([np.ones(cols.size), column_factors[cols]])
    target = y - mu - column_bias[cols]
    gram = np.broadcast_to(prior_precision, (n_rows, dim, dim)).copy()
    for a in range(dim):
        for b in range(a, dim):
            total = np.bincount(rows, features[:, a] * features[:, b], minlength=n_rows)
            gram[:, a, b] += total
            if b != a:
                gram[:, b, a] += total
    rhs = np.column_stack([np.bincount(rows, features[:, a] * target, minlength=n_rows) for a in range(dim)]).astype(float)
    rhs += prior_precision @ prior_mean
    theta = np.linalg.solve(gram, rhs[..., None])[..., 0]
    return theta[:, 0], theta[:, 1:]
