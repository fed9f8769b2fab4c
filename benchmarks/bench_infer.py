"""Accuracy and speed of collaborative-filtering score inference (packer.characterization.infer).

Usage: ``.venv/bin/python benchmarks/bench_infer.py [--rows 2000] [--scale-rows 37000]``

Synthetic data, shaped like sensitivity scores (all numbers derive from the repo's
models, nothing is tuned to the method):

- Columns: every architecture of ``models/fleet.toml`` × (cpu, membw, net) = 18.
- Classes low/medium/high with the class means of the measured (Broadwell20) rows
  of ``models/sensitivity.csv``; a row's score on architecture A follows Eq. 1 of
  the colocation paper, ``s · g_k(M)/g_k(A)`` (``packer.characterization.normalize``).
- Tasks in a class behave alike but not identically: a row's measured-arch score in
  dimension k is ``class_mean_k · exp(σ_int·a_u + σ_dim·d_uk)`` (a_u: the task is
  more/less sensitive than its class in every dimension; d_uk: per dimension),
  times ``exp(σ_arch·h_u·w_A)`` (a task-specific preference for some architectures
  that Eq. 1 does not capture). a, d, h ~ N(0, 1); w: fixed standardized loadings.
- Measurements carry multiplicative noise ``1 + σ_noise·N(0, 1)``; errors are
  measured against the noise-free truth on the entries that were not measured.
- Training rows: 50 densely measured rows (Paragon used 20 and 50 offline
  workloads). Every other row gets k measured entries at random columns.

Two scenarios: ``shared`` (σ_int=0.25, σ_dim=0.10, σ_arch=0.10, noise 0.03;
within-class variation mostly common to all dimensions) and ``per-dim``
(σ_int=0.05, σ_dim=0.15, same arch/noise; within-class variation mostly
independent per dimension, like the within-class pairs of Table III). Both were
fixed before measuring.

Compared side by side:
- ``cf``: ScoreInference with its defaults.
- ``cf-ridge``: the fold-in with Quasar's isotropic λ instead of the empirical prior.
- ``cf-identity``: fitted on raw scores instead of log-scores.
- ``class-mean``: each row gets the mean of its class's training rows, with the TRUE
  class label (the colocation paper's "tasks in a class behave alike").
- ``oracle-linear``: the best linear predictor in log space given the measured
  entries, using the covariance of 50,000 fresh dense rows — what a linear method
  could reach knowing the distribution exactly (a reference, not a method).
"""
from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from packer.io.fleet import load_fleet
from packer.characterization.infer import ScoreInference
from packer.characterization.normalize import SENSITIVITY_DIMS, sensitivity_capacity

MODELS = Path(__file__).resolve().parents[1] / "models"
MEASURED_ARCH = "Broadwell20"
SCENARIOS = {
    "shared": dict(s_int=0.25, s_dim=0.10, s_arch=0.10, noise=0.03),
    "per-dim": dict(s_int=0.05, s_dim=0.15, s_arch=0.10, noise=0.03),
}
N_TRAIN = 50


def eq1_factors() -> tuple[list[str], np.ndarray]:
    """Architectures and ``g_k(M)/g_k(A)`` (arch × dim) for M = the measured architecture."""
    fleet = load_fleet(MODELS / "fleet.toml")
    g = np.column_stack([sensitivity_capacity(fleet, d).to_numpy() for d in SENSITIVITY_DIMS])
    archs = list(fleet.archs.index)
    return archs, g[archs.index(MEASURED_ARCH)][None, :] / g


def class_means() -> np.ndarray:
    """Mean measured score per class (low, medium, high) × dim, from models/sensitivity.csv."""
    table = pd.read_csv(MODELS / "sensitivity.csv")
    measured = table[table["measured"] & (table["arch"] == MEASURED_ARCH)]
    return measured.groupby("class")[list(SENSITIVITY_DIMS)].mean().loc[["low", "medium", "high"]].to_numpy()


def generate(n: int, rng: np.random.Generator, s_int: float, s_dim: float, s_arch: float, noise: float):
    """``(truth, measured, labels)``: n × 18 noise-free scores, noisy measurements, class index."""
    archs, factor = eq1_factors()
    loading = np.random.default_rng(12345).standard_normal(len(archs))
    loading = (loading - loading.mean()) / loading.std()
    labels = rng.integers(0, 3, n)
    per_dim = class_means()[labels] * np.exp(s_int * rng.standard_normal((n, 1)) + s_dim * rng.standard_normal((n, 3)))
    arch_term = np.exp(s_arch * rng.standard_normal(n)[:, None] * loading[None, :])
    truth = (factor[None, :, :] * per_dim[:, None, :] * arch_term[:, :, None]).reshape(n, -1)
    measured = truth * (1 + noise * rng.standard_normal(truth.shape))
    return truth, measured, labels


def observe(measured: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Dense training rows + k random measured entries per other row, NaN elsewhere."""
    n, m = measured.shape
    matrix = np.full((n, m), np.nan)
    matrix[:N_TRAIN] = measured[:N_TRAIN]
    sparse = np.arange(N_TRAIN, n)
    chosen = np.argsort(rng.random((sparse.size, m)), axis=1)[:, :k]
    matrix[sparse[:, None], chosen] = measured[sparse[:, None], chosen]
    return matrix


def oracle_linear(matrix: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Conditional mean in log space under the Gaussian fitted to ``reference`` (dense rows)."""
    logs = np.log(reference)
    mean, cov = logs.mean(axis=0), np.cov(logs, rowvar=False)
    observed = ~np.isnan(matrix)
    k = int(observed[N_TRAIN:].sum(axis=1).max())
    cols = np.argsort(~observed, axis=1, kind="stable")[:, :k]  # the k observed columns of each row
    x = np.log(np.take_along_axis(matrix, cols, axis=1)) - mean[cols]
    c_oo = cov[cols[:, :, None], cols[:, None, :]]
    c_ao = cov[:, cols].transpose(1, 0, 2)  # rows × all columns × k
    weights = np.linalg.solve(c_oo, x[..., None])
    return np.exp(mean[None, :] + (c_ao @ weights)[..., 0])


def errors(estimate: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    absolute = np.abs(estimate - truth)[mask]
    relative = absolute / truth[mask]
    return {"avg": absolute.mean(), "p90": np.percentile(absolute, 90), "max": absolute.max(),
            "rel_avg": relative.mean(), "rel_p90": np.percentile(relative, 90)}


def accuracy(scenario: str, n_rows: int, seed: int) -> None:
    params = SCENARIOS[scenario]
    rng = np.random.default_rng(seed)
    truth, measured, labels = generate(n_rows, rng, **params)
    reference = generate(50_000, np.random.default_rng(seed + 1), **params)[1]
    train_labels = labels[:N_TRAIN]
    per_class = np.stack([measured[:N_TRAIN][train_labels == c].mean(axis=0) for c in range(3)])
    class_mean = per_class[labels]
    print(f"\n== scenario {scenario} ({', '.join(f'{k}={v}' for k, v in params.items())}); "
          f"{n_rows} rows ({N_TRAIN} dense training rows), 18 columns; "
          f"truth in [{np.percentile(truth, 5):.2f}, {np.percentile(truth, 95):.2f}] (5th-95th pct)")
    header = (f"{'k':>2} {'method':<14} {'avg':>7} {'p90':>7} {'max':>7} {'rel avg':>8} {'rel p90':>8} "
              f"{'vs class':>9} {'est. err':>9} {'epochs':>6} {'fit s':>6}")
    print(header)
    print("-" * len(header))
    for k in (1, 2, 3, 4, 5, 6, 8):
        matrix = observe(measured, k, np.random.default_rng(seed + 100 + k))
        mask = np.isnan(matrix)
        baseline = errors(class_mean, truth, mask)
        rows = []
        variants = {"cf": {}}
        if k == 2:
            variants |= {"cf-ridge": {"fold_in_prior": "ridge"}, "cf-identity": {"transform": "identity"}}
        for name, extra in variants.items():
            start = time.perf_counter()
            model = ScoreInference(seed=seed, **extra).fit(matrix)
            filled = model.fill()
            seconds = time.perf_counter() - start
            rows.append((name, errors(filled, truth, mask), model.expected_error_[mask].mean(), model.n_epochs_, seconds))
        rows.append(("class-mean", baseline, np.nan, None, None))
        rows.append(("oracle-linear", errors(oracle_linear(matrix, reference), truth, mask), np.nan, None, None))
        for name, e, estimated, epochs, seconds in rows:
            print(f"{k:>2} {name:<14} {e['avg']:7.4f} {e['p90']:7.4f} {e['max']:7.4f} {e['rel_avg']:8.1%} {e['rel_p90']:8.1%} "
                  f"{e['avg'] / baseline['avg']:9.2f} "
                  f"{'' if np.isnan(estimated) else f'{estimated:.4f}':>9} {'' if epochs is None else epochs:>6} "
                  f"{'' if seconds is None else f'{seconds:.2f}':>6}")


def scale(n_rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth, measured, _ = generate(n_rows, rng, **SCENARIOS["shared"])
    matrix = observe(measured, 2, np.random.default_rng(seed + 7))
    tracemalloc.start()
    start = time.perf_counter()
    model = ScoreInference(seed=seed).fit(matrix)
    filled = model.fill()
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    e = errors(filled, truth, np.isnan(matrix))
    print(f"\n== scale: {n_rows} rows x 18 columns, {N_TRAIN} dense rows + 2 measured entries per other row "
          f"({int((~np.isnan(matrix)).sum())} observed entries)")
    print(f"fit + fill wall time {seconds:.2f} s ({model.n_epochs_} SGD epochs), "
          f"peak traced memory {peak / 2**20:.1f} MiB, process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
          f"avg abs error {e['avg']:.4f}, p90 {e['p90']:.4f}, rel avg {e['rel_avg']:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="rows of the accuracy runs")
    parser.add_argument("--scale-rows", type=int, default=37_000, help="rows of the timing run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for scenario in SCENARIOS:
        accuracy(scenario, args.rows, args.seed)
    scale(args.scale_rows, args.seed)


if __name__ == "__main__":
    main()
