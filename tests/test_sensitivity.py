"""The sensitivity table: loading, validation, and assignment of scores to tasks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from packer.errors import InputError
from packer.io.fleet import load_fleet
from packer.characterization.normalize import translate_sensitivity
from packer.characterization.sensitivity import assign_scores, load_sensitivity

FLEET = load_fleet()
GOOD = """service,class,arch,cpu,membw,net,measured
A,low,Broadwell20,0.5,0.4,0.3,true
B,low,Skylake16,0.6,0.2,0.1,true
C,high,Broadwell20,0.9,0.8,0.7,true
C,high,Haswell10,1.1,1.3,1.9,false
"""


def write(tmp_path: Path, text: str, name: str = "sens.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_default_table_loads():
    table = load_sensitivity(fleet=FLEET)
    assert len(table.rows) == 12 and len(table.inputs) == 6
    assert set(table.inputs["arch"]) == {"Broadwell20"}
    assert table.dims == ("cpu", "membw", "net")


@pytest.mark.parametrize(
    ("text", "column", "message", "shown"),
    [
        (GOOD.replace("Skylake16", "Skylake99"), "arch", "missing from the fleet catalog", "Skylake99"),
        (GOOD.replace("0.6,0.2", "5.5,0.2"), "cpu", "outside [0, 5]", "row 1"),
        (GOOD.replace("0.6,0.2", "-0.1,0.2"), "cpu", "outside [0, 5]", "row 1"),
        (GOOD.replace("0.4,0.3", "0.4,"), "net", "missing score", "row 0"),
        (GOOD.replace("0.4,0.3", "0.4,high"), "net", "non-numeric score", "row 0"),
        (GOOD.replace(",membw", ",mbw"), "membw", "required column missing", ""),
        (GOOD.replace("service,class", "svc,cls"), "service or class", "required column missing", ""),
        (GOOD.replace("0.7,true", "0.7,maybe"), "measured", "expected true or false", "row 2"),
        (GOOD + "A,low,Broadwell20,0.5,0.4,0.3,true\n", "arch", "duplicate row", "row 0"),
        (GOOD.replace("1.9,false", "1.9,true"), "arch", "more than one architecture", "row 2"),
    ],
)
def test_bad_tables_name_file_column_and_rows(tmp_path, text, column, message, shown):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_sensitivity(path, FLEET)
    text = str(err.value)
    assert str(path) in text and f"'{column}'" in text and message in text and shown in text


def test_unknown_service_without_class_is_an_error(tmp_path):
    path = write(tmp_path, "service,arch,cpu,membw,net\nLog1,Broadwell20,0.5,0.4,0.3\nTypo,Broadwell20,0.5,0.4,0.3\n")
    with pytest.raises(InputError, match="service not in the trace") as err:
        load_sensitivity(path, FLEET, services=["Log1", "web"])
    assert "Typo" in str(err.value) and "Log1'" not in str(err.value)
    # With a class the row still stands for its class (the paper's candidate services).
    load_sensitivity(write(tmp_path, GOOD), FLEET, services=["web"])


def test_missing_file_and_empty_table(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_sensitivity(tmp_path / "nope.csv", FLEET)
    with pytest.raises(InputError, match="no rows"):
        load_sensitivity(write(tmp_path, "service,arch,cpu,membw,net\n"), FLEET)


def classified(rows: list[tuple[str, str | None, str, str]]) -> pd.DataFrame:
    """(task_id, service, type, class) rows -> the frame assign_scores expects."""
    df = pd.DataFrame(rows, columns=["task_id", "service", "type", "class"])
    levels = {"low": 0.0, "medium": 0.5, "high": 1.0}
    return df.assign(class_level=df["class"].map(levels))


def test_service_then_class_then_nearest_class(tmp_path):
    table = load_sensitivity(write(tmp_path, GOOD), FLEET)
    tasks = classified([
        ("t1", "A", "II", "low"),      # measured service
        ("t2", None, "II", "low"),     # class low = aggregate of A, B on Broadwell20
        ("t3", None, "II", "high"),    # class high = C
        ("t4", None, "II", "medium"),  # no medium service: nearest level, ties go up -> high
        ("t5", "C", "II", "low"),      # C's tasks are in the trace... but t6/t7 outvote it
        ("t6", "C", "II", "high"),
        ("t7", "C", "II", "high"),
        ("t8", None, "I", "low"),      # type I has no measured class: the same level of type II
    ])
    result = assign_scores(tasks, table, FLEET, "max").tasks.set_index("task_id")
    assert tuple(result.loc["t1", ["cpu", "membw", "net"]]) == (0.5, 0.4, 0.3)
    assert result.loc["t1", "measured_on"] == "Broadwell20" and result.loc["t1", "score_source"] == "service"
    # B measured on Skylake16 is expressed on Broadwell20 before the maximum.
    b_on_bw20 = [translate_sensitivity(v, d, "Skylake16", "Broadwell20", FLEET)[0] for v, d in zip((0.6, 0.2, 0.1), ("cpu", "membw", "net"))]
    np.testing.assert_allclose(result.loc["t2", ["cpu", "membw", "net"]].to_numpy(float), np.maximum([0.5, 0.4, 0.3], b_on_bw20))
    assert result.loc["t2", "measured_on"] == "Broadwell20" and result.loc["t2", "score_source"] == "class"
    assert tuple(result.loc["t3", ["cpu", "membw", "net"]]) == (0.9, 0.8, 0.7)
    assert result.loc["t4", "score_source"] == "nearest-class" and result.loc["t4", "score_class"] == "II/high"
    assert tuple(result.loc["t4", ["cpu", "membw", "net"]]) == (0.9, 0.8, 0.7)
    assert result.loc["t5", "score_source"] == "service"  # its own service's scores, whatever its class
    assert result.loc["t8", "score_source"] == "nearest-class" and result.loc["t8", "score_class"] == "II/low"
    np.testing.assert_allclose(result.loc["t8", ["cpu", "membw", "net"]].to_numpy(float), result.loc["t2", ["cpu", "membw", "net"]].to_numpy(float))
    # The default aggregate is the mean of the class's services.
    mean = assign_scores(tasks, table, FLEET).tasks.set_index("task_id")
    np.testing.assert_allclose(mean.loc["t2", ["cpu", "membw", "net"]].to_numpy(float), (np.array([0.5, 0.4, 0.3]) + b_on_bw20) / 2)
    with pytest.raises(InputError, match="unknown class score aggregate"):
        assign_scores(tasks, table, FLEET, "median")


def test_every_task_is_scored_whatever_the_type_of_its_host(tmp_path):
    """Scores measured on Type II reach Type I classes by level: same level first, then the nearest, own type first."""
    table = load_sensitivity(fleet=FLEET)
    tasks = classified([("a", None, "II", "low"), ("b", None, "II", "high"), ("c", None, "I", "low"), ("d", None, "I", "medium"),
                        ("e", None, "I", "high"), ("f", "Rank2", "II", "high")])
    out = assign_scores(tasks, table, FLEET).tasks.set_index("task_id")
    assert (out["score_source"] != "none").all() and out[["cpu", "membw", "net"]].notna().all().all()
    assert out.loc[["c", "d", "e"], "score_class"].tolist() == ["II/low", "II/medium", "II/high"]
    assert tuple(out.loc["c", ["cpu", "membw", "net"]]) == tuple(out.loc["a", ["cpu", "membw", "net"]])
    assert out.loc["f", "score_source"] == "service" and out.loc["f", "cpu"] == 0.93
    # A type with a scored class of its own keeps its own type on equal distance.
    own = GOOD + "D,medium,Skylake14,0.3,0.3,0.3,true\n"
    tasks = classified([("x", "D", "I", "medium"), ("y", None, "I", "low"), ("z", None, "II", "medium"), ("w", None, "I", "high")])
    out = assign_scores(tasks, load_sensitivity(write(tmp_path, own), FLEET), FLEET).tasks.set_index("task_id")
    assert out.loc["y", "score_class"] == "II/low"   # same level in another type beats a neighbouring level
    assert out.loc["z", "score_class"] == "I/medium"  # no medium in type II: the same level of type I
    assert out.loc["w", "score_class"] == "II/high"


def test_service_joins_the_class_most_of_its_tasks_are_in(tmp_path):
    # The table says A is "low", but in the trace A's tasks are mostly "high": A's scores shape class high.
    table = load_sensitivity(write(tmp_path, GOOD), FLEET)
    tasks = classified([("a1", "A", "II", "high"), ("a2", "A", "II", "high"), ("a3", "A", "II", "low"), ("x", None, "II", "high"), ("y", None, "II", "low")])
    classes = assign_scores(tasks, table, FLEET, "max").classes.set_index(["type", "class"])
    assert classes.loc[("II", "high"), "source"] == "max of A, C"
    assert classes.loc[("II", "low"), "source"] == "max of B"
    classes = assign_scores(tasks, table, FLEET).classes.set_index(["type", "class"])
    assert classes.loc[("II", "high"), "source"] == "mean of A, C"
    assert classes.loc[("II", "high"), "cpu"] == pytest.approx(0.7)


def test_class_rows_and_unmeasured_rows(tmp_path):
    text = GOOD + ",medium,Broadwell20,0.2,0.2,0.2,true\n"
    table = load_sensitivity(write(tmp_path, text), FLEET)
    out = assign_scores(classified([("m", None, "II", "medium")]), table, FLEET).tasks
    assert tuple(out.loc[0, ["cpu", "membw", "net"]]) == (0.2, 0.2, 0.2) and out.loc[0, "score_source"] == "class"
    # The unmeasured Haswell10 row of C is never used as an input.
    assert "Haswell10" not in set(table.inputs["arch"])


def test_default_table_on_a_trace_without_those_services():
    table = load_sensitivity(fleet=FLEET, services=["web", "db"])
    tasks = classified([("1", "web", "II", "high"), ("2", "db", "II", "low"), ("3", None, "I", "medium")])
    out = assign_scores(tasks, table, FLEET, "max")
    t = out.tasks.set_index("task_id")
    # Table II's "high" = max(KeyVal3, Rank2) on Broadwell20.
    assert tuple(t.loc["1", ["cpu", "membw", "net"]]) == (0.93, 0.86, 0.96)
    assert tuple(t.loc["2", ["cpu", "membw", "net"]]) == (0.68, 0.6, 0.61)
    # Table III's services are Type II clusters; a Type I medium task takes Type II's medium class.
    assert t.loc["3", "score_source"] == "nearest-class" and tuple(t.loc["3", ["cpu", "membw", "net"]]) == (0.64, 0.53, 0.51)
    # The mean of Table III's Broadwell20 rows per Table II class (the default).
    t = assign_scores(tasks, table, FLEET).tasks.set_index("task_id")
    np.testing.assert_allclose(t.loc["1", ["cpu", "membw", "net"]].to_numpy(float), [0.87, 0.81, 0.93])
    np.testing.assert_allclose(t.loc["2", ["cpu", "membw", "net"]].to_numpy(float), [0.655, 0.505, 0.605])
    np.testing.assert_allclose(t.loc["3", ["cpu", "membw", "net"]].to_numpy(float), [0.635, 0.49, 0.435])


def test_empty_cells_are_filled_by_inference(tmp_path):
    """With allow_missing, Rank2's CPU score (0.93 in Table III) is inferred from the other services."""
    from packer.characterization.sensitivity import fill_missing_scores

    text = (Path(__file__).resolve().parents[1] / "models" / "sensitivity.csv").read_text()
    path = write(tmp_path, text.replace("Rank2,high,Broadwell20,0.93,", "Rank2,high,Broadwell20,,"))
    with pytest.raises(InputError, match="missing score"):
        load_sensitivity(path, FLEET)
    table = load_sensitivity(path, FLEET, allow_missing=True)
    filled, entries = fill_missing_scores(table, FLEET)
    assert entries[["service", "arch", "dim"]].values.tolist() == [["Rank2", "Broadwell20", "cpu"]]
    rank2 = filled.rows[(filled.rows["service"] == "Rank2") & filled.rows["measured"]].iloc[0]
    assert 0.6 < rank2["cpu"] < 1.2 and rank2["inferred"] == "cpu"
    assert 0 <= entries.loc[0, "confidence"] <= 1
    # Measured cells are untouched; the derived (unmeasured) rows are not inputs and stay as printed.
    pd.testing.assert_frame_equal(filled.rows.drop(index=rank2.name)[["cpu", "membw", "net"]], table.rows.drop(index=rank2.name)[["cpu", "membw", "net"]])
    out = assign_scores(classified([("r", "Rank2", "II", "high"), ("h", None, "II", "high"), ("l", None, "II", "low")]), filled, FLEET).tasks
    assert out["scores_inferred"].tolist() == [True, True, False]
    # A table with nothing missing is returned as is.
    same, none = fill_missing_scores(load_sensitivity(fleet=FLEET), FLEET)
    assert none.empty and same.rows["inferred"].eq("").all()
    with pytest.raises(InputError, match="no score at all"):
        load_sensitivity(write(tmp_path, "service,class,arch,cpu,membw,net\nA,low,Broadwell20,,,\n"), FLEET, allow_missing=True)


def test_an_unscored_class_takes_the_scores_of_the_class_whose_centre_is_nearest():
    """Type I clustered into two classes: its upper class (level 1, like Type II's high) resembles Type II's medium."""
    table = load_sensitivity(fleet=FLEET)
    tasks = pd.DataFrame({"task_id": ["a", "b", "c", "d", "e"], "service": None, "type": ["I", "I", "II", "II", "II"],
                          "class": ["level-1/2", "level-2/2", "low", "medium", "high"], "class_level": [0.0, 1.0, 0.0, 0.5, 1.0]})
    centres = pd.DataFrame({"type": ["I", "I", "II", "II", "II"], "class": ["level-1/2", "level-2/2", "low", "medium", "high"],
                            "cpu_ref_cores": [1.2, 14.3, 1.3, 17.7, 29.7], "mem_gib": [3.4, 11.9, 3.6, 36.6, 56.6],
                            "net_gbps": [0.08, 0.5, 0.11, 0.53, 1.6], "scale_cpu": [1.1, 1.1, 1.0, 1.0, 1.0],
                            "scale_mem": [0.7, 0.7, 1.0, 1.0, 1.0], "scale_net": [0.2, 0.2, 0.3, 0.3, 0.3]})
    by_centre = assign_scores(tasks, table, FLEET, centroids=centres).tasks.set_index("task_id")
    assert by_centre.loc[["a", "b"], "score_class"].tolist() == ["II/low", "II/medium"]
    by_level = assign_scores(tasks, table, FLEET).tasks.set_index("task_id")
    assert by_level.loc[["a", "b"], "score_class"].tolist() == ["II/low", "II/high"]
