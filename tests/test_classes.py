"""Workload classes: elbow choice, stable labels, determinism, architecture-independent CPU, unprofiled tasks."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import packer.characterization.classes as classes_module
from packer.characterization.classes import class_labels, class_level, classify_tasks, elbow_k, wcss_curve
from packer.errors import InputError
from packer.io.fleet import load_fleet

FLEET = load_fleet()
# Two architectures per umbrella type, so features must be normalized to compare tasks.
TYPE_ARCHS = {"I": ["Haswell10", "Broadwell18"], "II": ["Broadwell20", "Skylake16"]}


def blob_trace(blobs: dict[str, int], per_blob: int = 60, seed: int = 0, spread: float = 0.08):
    """Hosts, tasks and p99 profiles whose usage forms ``blobs[type]`` well-separated clusters per type.

    Blob b sits at a distinct point in log space (cpu in reference cores, GiB, Gbps);
    CPU is then expressed as cores of the task's current host, so the clusters are only
    recovered if CPU is normalized across architectures.
    """
    rng = np.random.default_rng(seed)
    hosts, tasks, profiles = [], [], []
    tput = FLEET.per_core_throughput
    ref_tput = tput["Broadwell18"]
    for utype, n_blobs in blobs.items():
        archs = TYPE_ARCHS[utype]
        hosts += [{"host_id": f"{utype}-{a}", "arch": a} for a in archs]
        # Spread blob centres along all three axes, with a per-blob twist so they are not collinear.
        for b in range(n_blobs):
            centre = np.array([0.5 + 1.4 * b, 1.0 + 1.1 * b + 0.6 * (b % 2), -1.5 + 0.9 * b - 0.5 * (b % 2)])
            logs = centre + rng.normal(0, spread, (per_blob, 3))
            ref_cores, mem, net = np.exp(logs).T
            arch = np.asarray(archs)[rng.integers(0, len(archs), per_blob)]
            cores = ref_cores * ref_tput / tput[arch].to_numpy()
            ids = [f"{utype}-b{b}-{i}" for i in range(per_blob)]
            tasks.append(pd.DataFrame({"task_id": ids, "host_id": [f"{utype}-{a}" for a in arch],
                                       "cpu_request": cores * 2, "mem_request": mem * 2, "net_request": net * 2, "blob": b}))
            profiles.append(pd.DataFrame({"task_id": ids, "cpu_p99": cores, "mem_p99": mem, "net_p99": net}))
    tasks = pd.concat(tasks, ignore_index=True)
    order = rng.permutation(len(tasks))  # so cluster numbering cannot follow input order
    return pd.DataFrame(hosts), tasks.iloc[order].reset_index(drop=True), pd.concat(profiles, ignore_index=True).iloc[order].reset_index(drop=True)


def test_elbow_of_simple_curves():
    assert elbow_k([100, 10, 8, 7, 6.5, 6]) == 2
    assert elbow_k([100, 60, 8, 7, 6.5, 6, 5.8, 5.6]) == 3
    assert elbow_k([5.0]) == 1
    assert elbow_k([3.0, 3.0, 3.0]) == 1
    assert elbow_k([10.0, 2.0]) == 2


@pytest.mark.parametrize("truth", [3, 5])
def test_elbow_finds_the_number_of_blobs(truth):
    rng = np.random.default_rng(truth)
    centres = rng.uniform(-10, 10, (truth, 3))
    x = np.concatenate([c + rng.normal(0, 0.3, (80, 3)) for c in centres])
    curve, _, _ = wcss_curve(x, 8, seed=0)
    assert np.all(np.diff(curve) <= 1e-9)
    assert elbow_k(curve) == truth


def test_classify_chooses_k_per_type_and_recovers_blobs():
    hosts, tasks, profiles = blob_trace({"I": 5, "II": 3})
    result = classify_tasks(profiles, tasks, hosts, FLEET, seed=0)
    assert result.chosen_k == {"I": 5, "II": 3}
    t = result.tasks
    assert set(t.loc[t["type"] == "II", "class"]) == {"low", "medium", "high"}
    assert set(t.loc[t["type"] == "I", "class"]) == {f"level-{i}/5" for i in range(1, 6)}
    # Each blob is exactly one class, and class order follows blob order (blob b grows with b).
    pairs = pd.DataFrame({"type": t["type"], "blob": tasks["blob"], "level": t["class_level"]}).drop_duplicates()
    assert len(pairs) == 8
    for _, group in pairs.groupby("type"):
        assert group.sort_values("blob")["level"].is_monotonic_increasing
    wcss = result.wcss
    assert set(wcss["type"]) == {"I", "II"} and wcss.groupby("type")["chosen"].sum().eq(1).all()
    cents = result.centroids
    assert set(cents.columns) >= {"type", "class", "n_tasks", "cpu_cu", "cpu_ref_cores", "mem_gib", "net_gbps"}
    assert cents["n_tasks"].sum() == len(tasks)
    # Centroids in real units: the low Type II class sits near exp(blob 0 centre) = (1.65 cores, 2.7 GiB, 0.22 Gbps).
    low = cents[(cents["type"] == "II") & (cents["class"] == "low")].iloc[0]
    assert low["cpu_ref_cores"] == pytest.approx(np.exp(0.5), rel=0.05)
    assert low["mem_gib"] == pytest.approx(np.exp(1.0), rel=0.05)
    assert low["net_gbps"] == pytest.approx(np.exp(-1.5), rel=0.05)


def test_labels_are_stable_across_seeds():
    hosts, tasks, profiles = blob_trace({"I": 3, "II": 3}, seed=3)
    runs = [classify_tasks(profiles, tasks, hosts, FLEET, seed=s).tasks["class"] for s in range(5)]
    for other in runs[1:]:
        pd.testing.assert_series_equal(runs[0], other)


def test_deterministic_for_a_seed():
    hosts, tasks, profiles = blob_trace({"I": 2, "II": 4}, spread=0.5, seed=4)
    a = classify_tasks(profiles, tasks, hosts, FLEET, seed=7)
    b = classify_tasks(profiles, tasks, hosts, FLEET, seed=7)
    pd.testing.assert_frame_equal(a.tasks, b.tasks)
    pd.testing.assert_frame_equal(a.wcss, b.wcss)
    pd.testing.assert_frame_equal(a.centroids, b.centroids)


def test_minibatch_path_is_deterministic_and_labels_blobs(monkeypatch):
    monkeypatch.setattr(classes_module, "MINIBATCH_ABOVE", 50)
    hosts, tasks, profiles = blob_trace({"II": 3}, per_blob=100)
    a = classify_tasks(profiles, tasks, hosts, FLEET, seed=1)
    b = classify_tasks(profiles, tasks, hosts, FLEET, seed=1)
    pd.testing.assert_frame_equal(a.tasks, b.tasks)
    assert a.chosen_k == {"II": 3}
    assert pd.crosstab(tasks["blob"], a.tasks["class"]).gt(0).sum(axis=1).eq(1).all()


def test_k_override_and_labels():
    hosts, tasks, profiles = blob_trace({"II": 3})
    result = classify_tasks(profiles, tasks, hosts, FLEET, k=2)
    assert result.chosen_k == {"II": 2}
    assert set(result.tasks["class"]) == {"level-1/2", "level-2/2"}
    assert class_labels(3) == ["low", "medium", "high"]
    assert [class_level(x) for x in class_labels(3)] == [0.0, 0.5, 1.0]
    assert [class_level(x) for x in class_labels(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert np.isnan(class_level("bogus"))
    with pytest.raises(InputError, match="at least 1"):
        classify_tasks(profiles, tasks, hosts, FLEET, k=0)


def test_cpu_is_compared_in_architecture_independent_units():
    """The same work on a slow and a fast core is the same feature value."""
    hosts = pd.DataFrame({"host_id": ["a", "b"], "arch": ["Broadwell18", "Haswell10"]})
    tasks = pd.DataFrame({"task_id": ["x", "y"], "host_id": ["a", "b"], "cpu_request": [8.0, 8.0], "mem_request": [4.0, 4.0], "net_request": [1.0, 1.0]})
    # 6 Broadwell18 cores of work = 6 x (1/32) / (1.63/48) Haswell10 cores.
    haswell_cores = 6 * (1.0 / 32) / (1.63 / 48)
    profiles = pd.DataFrame({"task_id": ["x", "y"], "cpu_p99": [6.0, haswell_cores], "mem_p99": [2.0, 2.0], "net_p99": [0.5, 0.5]})
    t = classify_tasks(profiles, tasks, hosts, FLEET).tasks
    np.testing.assert_allclose(t["cpu_ref_cores"], [6.0, 6.0])
    np.testing.assert_allclose(t["cpu_cu"], [6 / 32, 6 / 32])
    np.testing.assert_allclose(t["cpu_cores"], [6.0, haswell_cores])


def test_unprofiled_tasks_are_classed_from_requests():
    hosts, tasks, profiles = blob_trace({"II": 3})
    # Requests are 2x p99 in blob_trace, so the type's median p99/request ratio is 0.5.
    extra = pd.DataFrame({"task_id": ["new-small", "new-big"], "host_id": ["II-Broadwell20"] * 2,
                          "cpu_request": [2 * np.exp(0.5) * 56 / 1.98 / 32, 2 * np.exp(3.3) * 56 / 1.98 / 32],
                          "mem_request": [2 * np.exp(1.0), 2 * np.exp(3.8)], "net_request": [2 * np.exp(-1.5), 2 * np.exp(0.3)], "blob": -1})
    tasks = pd.concat([tasks, extra], ignore_index=True)
    profiles = pd.concat([profiles, pd.DataFrame({"task_id": ["new-small"], "cpu_p99": [np.nan], "mem_p99": [np.nan], "net_p99": [np.nan]})], ignore_index=True)
    result = classify_tasks(profiles, tasks, hosts, FLEET)  # new-big has no profile row at all
    t = result.tasks.set_index("task_id")
    assert not t.loc["new-small", "profiled"] and not t.loc["new-big", "profiled"]
    assert t["profiled"].sum() == len(tasks) - 2
    assert t.loc["new-small", "class"] == "low" and t.loc["new-big", "class"] == "high"
    assert t.loc["new-small", "cpu_ref_cores"] == pytest.approx(np.exp(0.5), rel=0.01)
    # Unprofiled tasks do not move the centroids.
    hosts, tasks, profiles = blob_trace({"II": 3})
    base = classify_tasks(profiles, tasks, hosts, FLEET)
    pd.testing.assert_frame_equal(result.wcss, base.wcss)


def test_bad_profiles_are_input_errors():
    hosts, tasks, profiles = blob_trace({"II": 3})
    with pytest.raises(InputError, match="net_p99"):
        classify_tasks(profiles.drop(columns="net_p99"), tasks, hosts, FLEET, source="p.parquet")
    bad = profiles.copy()
    bad.loc[3, "mem_p99"] = -1.0
    with pytest.raises(InputError, match="negative") as err:
        classify_tasks(bad, tasks, hosts, FLEET, source="p.parquet")
    assert "p.parquet" in str(err.value) and bad.loc[3, "task_id"] in str(err.value)


def _continuous_population(n: int = 600, seed: int = 0):
    """Hosts, tasks and p99 profiles of one umbrella type with no clear clusters (lognormal usage)."""
    rng = np.random.default_rng(seed)
    hosts = pd.DataFrame({"host_id": ["h1", "h2"], "arch": ["Broadwell20", "Skylake16"]})
    ids = [f"t{i}" for i in range(n)]
    usage = np.exp(rng.normal([1.5, 2.5, -1.0], [0.9, 0.8, 0.7], (n, 3)))
    tasks = pd.DataFrame({"task_id": ids, "host_id": np.where(rng.random(n) < 0.5, "h1", "h2"),
                          "cpu_request": usage[:, 0] * 2, "mem_request": usage[:, 1] * 2, "net_request": usage[:, 2] * 2})
    profiles = pd.DataFrame({"task_id": ids, "cpu_p99": usage[:, 0], "mem_p99": usage[:, 1], "net_p99": usage[:, 2]})
    return hosts, tasks, profiles


def test_the_fit_as_its_own_reference_gives_the_same_classes():
    hosts, tasks, profiles = blob_trace({"I": 3, "II": 4}, seed=2)
    fit = classify_tasks(profiles, tasks, hosts, FLEET, seed=1)
    again = classify_tasks(profiles, tasks, hosts, FLEET, seed=99, reference=fit.centroids)
    assert (again.tasks["class"] == fit.tasks["class"]).all()
    assert again.chosen_k == fit.chosen_k and again.wcss.empty
    pd.testing.assert_frame_equal(again.centroids.drop(columns="n_tasks"), fit.centroids.drop(columns="n_tasks"), check_like=True)


def test_classes_are_stable_under_small_profile_changes_with_a_reference():
    """A task whose p99 profile barely changed keeps its class: fixed centres instead of a new fit."""
    hosts, tasks, profiles = _continuous_population()
    fit = classify_tasks(profiles, tasks, hosts, FLEET, k=3, seed=0)
    rng = np.random.default_rng(5)
    changed = profiles.copy()
    for col in ("cpu_p99", "mem_p99", "net_p99"):
        changed[col] *= np.exp(rng.normal(0, 0.01, len(changed)))  # ~1% week-to-week change
    kept = classify_tasks(changed, tasks, hosts, FLEET, seed=0, reference=fit.centroids)
    assert (kept.tasks["class"] == fit.tasks["class"]).mean() >= 0.98
    assert set(kept.tasks["class"]) == set(fit.tasks["class"]) == {"low", "medium", "high"}


def test_a_type_missing_from_the_reference_is_clustered_afresh():
    hosts, tasks, profiles = blob_trace({"I": 3, "II": 3}, seed=3)
    fit = classify_tasks(profiles, tasks, hosts, FLEET, seed=0)
    only_ii = fit.centroids[fit.centroids["type"] == "II"]
    mixed = classify_tasks(profiles, tasks, hosts, FLEET, seed=0, reference=only_ii)
    assert (mixed.tasks["class"] == fit.tasks["class"]).all()
    assert set(mixed.wcss["type"]) == {"I"}


def test_reference_classes_are_read_and_checked(tmp_path):
    from packer.characterization.classes import read_reference_classes

    hosts, tasks, profiles = blob_trace({"I": 2, "II": 2})
    fit = classify_tasks(profiles, tasks, hosts, FLEET)
    fit.centroids.to_parquet(tmp_path / "classes.parquet", index=False)
    pd.testing.assert_frame_equal(read_reference_classes(tmp_path), fit.centroids)
    with pytest.raises(InputError, match="reference classes not found"):
        read_reference_classes(tmp_path / "nowhere")
    fit.centroids.drop(columns="scale_cpu").to_parquet(tmp_path / "old.parquet", index=False)
    with pytest.raises(InputError, match="scale_cpu"):
        read_reference_classes(tmp_path / "old.parquet")
