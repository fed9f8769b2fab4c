"""Collaborative-filtering inference of missing sensitivity scores (packer.characterization.infer)."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from packer.errors import InputError
from packer.characterization.infer import ScoreInference, infer_scores

N_ROWS, N_COLS, RANK, N_DENSE = 500, 18, 3, 40


def low_rank_scores(seed: int = 0, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """(truth, measured): rank-3 log-scores plus column means, scores in ~0.2-2, 2% multiplicative noise."""
    rng = np.random.default_rng(seed)
    column_mean = rng.uniform(np.log(0.3), np.log(1.2), N_COLS)
    row_factors = rng.standard_normal((N_ROWS, RANK)) * np.array([0.30, 0.20, 0.15])
    column_factors = rng.standard_normal((N_COLS, RANK))
    truth = np.exp(column_mean + row_factors @ column_factors.T)
    return truth, truth * (1 + noise * rng.standard_normal(truth.shape))


def observe(measured: np.ndarray, per_row: int, seed: int = 1) -> np.ndarray:
    """Dense training rows + ``per_row`` random measured entries in every other row, NaN elsewhere."""
    rng = np.random.default_rng(seed)
    matrix = np.full(measured.shape, np.nan)
    matrix[:N_DENSE] = measured[:N_DENSE]
    sparse = np.arange(N_DENSE, measured.shape[0])
    chosen = np.argsort(rng.random((sparse.size, measured.shape[1])), axis=1)[:, :per_row]
    matrix[sparse[:, None], chosen] = measured[sparse[:, None], chosen]
    return matrix


def mean_relative_error(per_row: int, **params) -> tuple[float, float, ScoreInference]:
    """(CF error, column-mean error) on the missing entries, both relative to the truth."""
    truth, measured = low_rank_scores()
    matrix = observe(measured, per_row)
    model = ScoreInference(**params).fit(matrix)
    missing = np.isnan(matrix)
    cf = np.mean(np.abs(model.fill() - truth)[missing] / truth[missing])
    column_mean = np.nanmean(matrix, axis=0)[None, :].repeat(N_ROWS, axis=0)
    baseline = np.mean(np.abs(column_mean - truth)[missing] / truth[missing])
    return cf, baseline, model


def test_two_measured_entries_recover_low_rank_scores_with_margin():
    cf, baseline, _ = mean_relative_error(2)
    # Measured: 0.143 relative error vs 0.330 for the column means; the bounds leave ~40% slack.
    assert cf < 0.20
    assert cf < 0.6 * baseline


def test_error_falls_as_more_entries_are_measured():
    errors = [mean_relative_error(k)[0] for k in (1, 2, 4)]
    assert errors[0] > 1.15 * errors[1] > 1.15 * 1.15 * errors[2]


def test_identity_transform_fits_raw_scores():
    rng = np.random.default_rng(3)
    truth = 1.0 + 0.3 * rng.standard_normal((N_ROWS, RANK)) @ rng.standard_normal((RANK, N_COLS))
    matrix = observe(truth + 0.01 * rng.standard_normal(truth.shape), 3)
    filled = ScoreInference(transform="identity").fit(matrix).fill()
    missing = np.isnan(matrix)
    column_mean_error = np.mean(np.abs(np.nanmean(matrix, axis=0)[None, :] - truth)[missing])
    assert np.mean(np.abs(filled - truth)[missing]) < 0.5 * column_mean_error


def test_same_seed_same_result_and_seed_matters():
    _, measured = low_rank_scores()
    matrix = observe(measured, 2)
    first = ScoreInference(seed=7).fit(matrix)
    second = ScoreInference(seed=7).fit(matrix)
    np.testing.assert_array_equal(first.fill(), second.fill())
    np.testing.assert_array_equal(first.confidence_, second.confidence_)
    other = ScoreInference(seed=8).fit(matrix)
    assert not np.array_equal(first.row_factors_, other.row_factors_)


def test_fit_entries_matches_dense_fit():
    _, measured = low_rank_scores()
    matrix = observe(measured, 2)
    rows, cols = np.nonzero(~np.isnan(matrix))
    dense = ScoreInference().fit(matrix).fill()
    sparse = ScoreInference().fit_entries(rows, cols, matrix[rows, cols], matrix.shape).fill()
    np.testing.assert_allclose(dense, sparse)


def test_confidence_tracks_measurements_and_actual_error():
    cf, _, model = mean_relative_error(2)
    truth, measured = low_rank_scores()
    matrix = observe(measured, 2)
    missing = np.isnan(matrix)
    assert np.all(model.confidence_[~missing] == 1.0)
    assert np.all(model.expected_error_[~missing] == 0.0)
    # Calibrated on held-out entries of the dense rows: within a factor 2 of the actual error.
    actual = np.mean(np.abs(model.fill() - truth)[missing])
    assert 0.5 * actual < model.expected_error_[missing].mean() < 2.0 * actual
    # More measurements, more confidence.
    assert model.calibration_[1].mean() > model.calibration_[2].mean() > model.calibration_[4].mean()


def test_empirical_prior_beats_quasars_isotropic_ridge_on_sparse_rows():
    # Factor scales differ (0.30, 0.20, 0.15): an isotropic λ shrinks them alike.
    empirical, baseline, _ = mean_relative_error(2)
    ridge = mean_relative_error(2, fold_in_prior="ridge")[0]
    assert empirical < 0.8 * ridge < 0.8 * baseline


def test_diverging_learning_rate_is_halved_not_fatal(caplog):
    _, measured = low_rank_scores()
    with caplog.at_level(logging.WARNING, logger="packer.characterization.infer"):
        model = ScoreInference(learning_rate=5.0).fit(observe(measured, 2))
    assert model.learning_rate_ < 5.0
    assert "diverged" in caplog.text
    assert np.isfinite(model.fill()).all()


def test_empty_rows_are_reported_and_get_group_means(caplog):
    _, measured = low_rank_scores()
    matrix = observe(measured, 2)
    matrix[[100, 101]] = np.nan
    groups = np.where(np.arange(N_ROWS) % 2 == 0, "low", "high")
    with caplog.at_level(logging.WARNING, logger="packer.characterization.infer"):
        model = ScoreInference().fit(matrix, groups, row_names=[f"task{i}" for i in range(N_ROWS)])
    assert "2 row(s) have no measured score" in caplog.text and "'task100'" in caplog.text
    np.testing.assert_array_equal(model.empty_rows_, [100, 101])
    filled = model.fill()
    informed = ~np.isin(np.arange(N_ROWS), [100, 101])
    np.testing.assert_allclose(filled[100], filled[informed & (groups == "low")].mean(axis=0))
    np.testing.assert_allclose(filled[101], filled[informed & (groups == "high")].mean(axis=0))
    assert model.confidence_[100].mean() < model.confidence_[200][np.isnan(matrix[200])].mean()


def test_all_nan_column_is_an_input_error_naming_it():
    _, measured = low_rank_scores()
    matrix = observe(measured, 2)
    matrix[:, 5] = np.nan
    names = [f"arch{i // 3}/{('cpu', 'membw', 'net')[i % 3]}" for i in range(N_COLS)]
    with pytest.raises(InputError, match=r"scores: column 'arch1/net': no workload has a measured score"):
        ScoreInference().fit(matrix, column_names=names)


def test_non_finite_scores_are_an_input_error_with_rows():
    _, measured = low_rank_scores()
    matrix = observe(measured, 2)
    matrix[:N_DENSE, 3] = measured[:N_DENSE, 3]
    matrix[[2, 7], 3] = np.inf
    with pytest.raises(InputError) as info:
        ScoreInference().fit(matrix, source="sens.parquet")
    message = str(info.value)
    assert "sens.parquet: column '3': scores must be finite numbers" in message
    assert "(2 rows); first: row 2 (inf), row 7 (inf)" in message


def test_non_positive_scores_need_the_identity_transform():
    _, measured = low_rank_scores()
    matrix = observe(measured, 2)
    matrix[0, 0] = 0.0
    with pytest.raises(InputError, match="must be > 0 for transform='log'; use transform='identity'"):
        ScoreInference().fit(matrix)
    assert np.isfinite(ScoreInference(transform="identity").fit(matrix).fill()).all()


@pytest.mark.parametrize("params, message", [
    ({"rank": 18}, r"rank must be an integer in \[1, 17\]"),
    ({"rank": 0}, "rank must be an integer"),
    ({"learning_rate": -1.0}, "learning_rate must be a positive number"),
    ({"transform": "sqrt"}, "transform must be one of"),
    ({"fold_in_prior": "flat"}, "fold_in_prior must be one of"),
    ({"max_epochs": 0}, "max_epochs must be a positive integer"),
])
def test_bad_parameters_are_input_errors(params, message):
    _, measured = low_rank_scores()
    with pytest.raises(InputError, match=message):
        ScoreInference(**params).fit(observe(measured, 2))


def test_bad_shapes_and_coordinates_are_input_errors():
    with pytest.raises(InputError, match="expected a non-empty 2-D matrix"):
        ScoreInference().fit(np.ones(5))
    with pytest.raises(InputError, match="entries given more than once"):
        ScoreInference(rank=1).fit_entries([0, 0, 1], [0, 0, 1], [1.0, 1.0, 1.0], (2, 2))
    with pytest.raises(InputError, match="entries outside the 2x2 matrix"):
        ScoreInference(rank=1).fit_entries([0, 5], [0, 1], [1.0, 1.0], (2, 2))


def test_infer_scores_keeps_labels_and_measured_values():
    truth, measured = low_rank_scores()
    matrix = observe(measured, 2)
    columns = pd.MultiIndex.from_product([[f"arch{i}" for i in range(6)], ["cpu", "membw", "net"]], names=["arch", "dim"])
    index = pd.Index([f"task{i}" for i in range(N_ROWS)], name="task_id")
    frame = pd.DataFrame(matrix, index=index, columns=columns)
    classes = pd.Series(np.where(np.arange(N_ROWS) < 250, "low", "high"), index=index)
    filled, confidence = infer_scores(frame, groups=classes)
    assert filled.index.equals(index) and filled.columns.equals(columns)
    assert confidence.index.equals(index) and confidence.columns.equals(columns)
    observed = frame.notna().to_numpy()
    np.testing.assert_array_equal(filled.to_numpy()[observed], matrix[observed])
    assert filled.notna().all().all() and ((confidence >= 0) & (confidence <= 1)).all().all()
    with pytest.raises(InputError, match="rows have no group label"):
        infer_scores(frame, groups=classes.iloc[:10])


@st.composite
def sparse_score_matrices(draw):
    n_rows = draw(st.integers(3, 25))
    n_cols = draw(st.integers(2, 7))
    values = draw(hnp.arrays(np.float64, (n_rows, n_cols), elements=st.floats(0.05, 3.0)))
    observed = draw(hnp.arrays(np.bool_, (n_rows, n_cols)))
    observed[draw(st.integers(0, n_rows - 1)), :] = True  # every column measured at least once
    return np.where(observed, values, np.nan)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(matrix=sparse_score_matrices(), rank=st.integers(1, 3), seed=st.integers(0, 3))
def test_fill_keeps_measurements_and_fills_everything(matrix, rank, seed):
    rank = min(rank, matrix.shape[1] - 1)
    model = ScoreInference(rank=rank, seed=seed, max_epochs=20).fit(matrix)
    filled = model.fill()
    observed = ~np.isnan(matrix)
    assert filled.shape == matrix.shape == model.confidence_.shape == model.expected_error_.shape
    assert np.isfinite(filled).all() and (filled > 0).all()
    np.testing.assert_array_equal(filled[observed], matrix[observed])
    assert np.all(model.confidence_[observed] == 1.0)
    assert ((model.confidence_ >= 0) & (model.confidence_ <= 1)).all()
    assert np.isfinite(model.predict()).all()
