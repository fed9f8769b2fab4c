"""Validation rules for the native trace tables, vectorized over whole columns.

Each ``check_*`` function returns a list of :class:`~packer.errors.Problem` (empty
when the table is fine); callers raise one :class:`~packer.errors.InputError` with
all of them so a user fixes everything in one go.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from packer.errors import MAX_ROWS_SHOWN, Problem
from packer.io.fleet import Fleet
from packer.model.rpf import BATCH_COLUMNS, GOAL_COLUMNS, TRANSACTIONAL_COLUMNS

#: Plausible ranges per resource dimension, in the trace's units. A value above the
#: bound almost always means a unit mistake (MiB given as GiB, Mbps as Gbps).
PLAUSIBLE_MAX = {
    "cpu": 1024.0,  # cores
    "mem": 16384.0,  # GiB
    "net": 1000.0,  # Gbps
    "membw": 4000.0,  # Gbps
    "gpu": 64.0,  # GPUs
}
UNITS = {"cpu": "cores", "mem": "GiB", "net": "Gbps", "membw": "Gbps", "gpu": "GPUs"}

HOSTS_REQUIRED = {"host_id": "string", "arch": "string"}
TASKS_REQUIRED = {
    "task_id": "string",
    "job_id": "string",
    "host_id": "string",
    "cpu_request": "number",
    "mem_request": "number",
    "net_request": "number",
}
USAGE_REQUIRED = {"task_id": "string", "ts": "timestamp", "cpu": "number", "mem": "number", "net": "number"}


def describe_rows(df: pd.DataFrame, mask: np.ndarray, columns: Sequence[str], offset: int = 0) -> tuple[str, ...]:
    """Short descriptions of the first flagged rows: ``"row 7 (task_id='t7', cpu=-1.0)"``."""
    idx = np.flatnonzero(np.asarray(mask))[:MAX_ROWS_SHOWN]
    shown = [c for c in dict.fromkeys(columns) if c in df.columns]
    out = []
    for i in idx:
        values = ", ".join(f"{c}={plain(df[c].iloc[i])!r}" for c in shown)
        out.append(f"row {offset + int(i)} ({values})")
    return tuple(out)


def plain(value):
    """A NumPy scalar as the Python number it holds, so messages show ``1.0``, not ``np.float64(1.0)``."""
    return value.item() if isinstance(value, np.generic) else value


def problem_if(file: str, column: str, message: str, df: pd.DataFrame, mask, show: Sequence[str], offset: int = 0) -> list[Problem]:
    """A one-element list with a :class:`Problem` when ``mask`` flags any row, else ``[]``."""
    mask = np.asarray(mask, dtype=bool)
    count = int(mask.sum())
    if count == 0:
        return []
    return [Problem(file, column, message, count, describe_rows(df, mask, show, offset))]


def _kind(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_numeric_dtype(series):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "timestamp"
    if pd.api.types.is_string_dtype(series) or pd.api.types.is_object_dtype(series):
        return "string"
    return str(series.dtype)


def check_columns(file: str, df: pd.DataFrame, required: dict[str, str], optional: dict[str, str] | None = None) -> list[Problem]:
    """Required columns exist and every known column has the expected kind of type."""
    problems = []
    missing = [c for c in required if c not in df.columns]
    if missing:
        problems.append(Problem(file, ", ".join(missing), f"required column missing (the file has: {', '.join(map(str, df.columns))})", 0))
    for col, kind in {**required, **(optional or {})}.items():
        if col not in df.columns:
            continue
        got = _kind(df[col])
        ok = got == kind or (kind == "string" and got == "string") or (kind == "timestamp" and got == "number")
        if kind == "string" and got == "number":
            ok = False
        if not ok:
            problems.append(Problem(file, col, f"expected a {kind} column, found {df[col].dtype}", 0))
    return problems


def check_not_empty(file: str, df: pd.DataFrame) -> list[Problem]:
    return [] if len(df) else [Problem(file, "", "the table has no rows", 0)]


def check_ids(file: str, df: pd.DataFrame, column: str) -> list[Problem]:
    """Ids are present and unique."""
    ids = df[column]
    problems = problem_if(file, column, "missing id", df, ids.isna().to_numpy(), [column])
    dup = ids.duplicated(keep=False).to_numpy() & ids.notna().to_numpy()
    problems += problem_if(file, column, "duplicate id", df, dup, [column])
    return problems


def check_amounts(file: str, df: pd.DataFrame, columns: Sequence[str], id_col: str, offset: int = 0) -> list[Problem]:
    """Resource amounts are finite, non-negative and within :data:`PLAUSIBLE_MAX` for their dimension."""
    problems = []
    for col in columns:
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        show = [id_col, col]
        problems += problem_if(file, col, "missing or NaN value", df, np.isnan(values), show, offset)
        problems += problem_if(file, col, "infinite value", df, np.isinf(values), show, offset)
        problems += problem_if(file, col, "negative value", df, values < 0, show, offset)
        dim = col.removesuffix("_request")
        bound = PLAUSIBLE_MAX.get(dim)
        if bound is not None:
            big = np.isfinite(values) & (values > bound)
            problems += problem_if(file, col, f"implausibly large (over {bound:g} {UNITS[dim]}: wrong unit?)", df, big, show, offset)
    return problems


def check_hosts(hosts: pd.DataFrame, fleet: Fleet, file: str = "hosts.parquet") -> list[Problem]:
    """Hosts table: schema, unique ids, architectures known to the fleet catalog."""
    problems = check_columns(file, hosts, HOSTS_REQUIRED, {"domain": "string", "pool": "string"}) + check_not_empty(file, hosts)
    if problems:
        return problems
    problems += check_ids(file, hosts, "host_id")
    if "pool" in hosts.columns:
        # A host outside every pool would belong to no independent problem: the column, once there, names each host's pool.
        problems += problem_if(file, "pool", "missing pool (once the column is there, every host needs one)", hosts,
                               hosts["pool"].isna().to_numpy(), ["host_id", "pool"])
    unknown = ~hosts["arch"].isin(fleet.archs.index).to_numpy()
    known = ", ".join(fleet.archs.index)
    problems += problem_if(file, "arch", f"architecture missing from the fleet catalog {fleet.source} (known: {known})", hosts, unknown, ["host_id", "arch"])
    return problems


def request_columns(tasks: pd.DataFrame) -> list[str]:
    """The ``<dim>_request`` columns: the trace's resource dimensions, in file order."""
    return [c for c in tasks.columns if c.endswith("_request")]


def check_tasks(tasks: pd.DataFrame, hosts: pd.DataFrame, fleet: Fleet, file: str = "tasks.parquet") -> list[Problem]:
    """Tasks table: schema, unique ids, current hosts exist, requests plausible, constraints name real architectures."""
    optional = {"service": "string", "movable": "bool", "allowed_archs": "string"}
    optional.update({c: "number" for c in request_columns(tasks)})
    optional.update({c: "number" for c in GOAL_COLUMNS})
    problems = check_columns(file, tasks, TASKS_REQUIRED, optional) + check_not_empty(file, tasks)
    if problems:
        return problems
    problems += check_ids(file, tasks, "task_id")
    problems += problem_if(file, "job_id", "missing job id", tasks, tasks["job_id"].isna().to_numpy(), ["task_id", "job_id"])
    unknown = ~tasks["host_id"].isin(hosts["host_id"]).to_numpy()
    problems += problem_if(file, "host_id", "task placed on a host that hosts.parquet does not list", tasks, unknown, ["task_id", "host_id"])
    problems += check_amounts(file, tasks, request_columns(tasks), "task_id")
    problems += check_capacities(file, tasks, fleet)
    if "movable" in tasks.columns:
        problems += problem_if(file, "movable", "missing value (use true or false)", tasks, tasks["movable"].isna().to_numpy(), ["task_id", "movable"])
    if "allowed_archs" in tasks.columns:
        named = tasks["allowed_archs"].dropna().str.split("|").explode().str.strip()
        bad_names = set(named) - set(fleet.archs.index)
        if bad_names:
            bad = tasks["allowed_archs"].fillna("").str.split("|").map(lambda names: bool(set(n.strip() for n in names) & bad_names))
            problems += problem_if(file, "allowed_archs", f"names architectures missing from the fleet catalog: {', '.join(sorted(bad_names))}", tasks, bad.to_numpy(), ["task_id", "allowed_archs"])
    problems += check_goals(file, tasks)
    return problems


def check_capacities(file: str, tasks: pd.DataFrame, fleet: Fleet) -> list[Problem]:
    """Every dimension the tasks request has a capacity in the fleet catalog (else no task requesting it could be placed)."""
    problems = []
    for col in request_columns(tasks):
        dim = col.removesuffix("_request")
        if dim in fleet.dims:
            continue
        values = pd.to_numeric(tasks[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        problems += problem_if(file, col, f"the fleet has no {dim} capacity: no architecture of {fleet.source} sets a number '{dim}' "
                                          f"(add it to the catalog, or drop the column)", tasks, values > 0, ["task_id", col])
    return problems


def check_goals(file: str, tasks: pd.DataFrame) -> list[Problem]:
    """Optional relative-performance goal columns (:data:`packer.model.rpf.GOAL_COLUMNS`): complete, finite and consistent per task.

    A transactional task (``rt_goal_s`` set) needs ``rt_goal_s`` > 0, ``request_rate`` ≥ 0
    and ``service_core_s`` > 0; a batch task (``deadline_s`` set) needs ``goal_start_s`` <
    ``deadline_s`` and ``work_core_s`` ≥ 0; no task is both.
    """
    present = [c for c in GOAL_COLUMNS if c in tasks.columns]
    if not present:
        return []
    values = {c: pd.to_numeric(tasks[c], errors="coerce").to_numpy(dtype=float, na_value=np.nan) if c in tasks.columns else np.full(len(tasks), np.nan)
              for c in GOAL_COLUMNS}
    problems = []
    for c in present:
        problems += problem_if(file, c, "infinite value", tasks, np.isinf(values[c]), ["task_id", c])
    for kind, columns, key in (("transactional", TRANSACTIONAL_COLUMNS, "rt_goal_s"), ("batch", BATCH_COLUMNS, "deadline_s")):
        has = ~np.isnan(values[key])
        for c in columns[1:]:
            problems += problem_if(file, c, f"missing for a {kind} task (it has {key})", tasks, has & np.isnan(values[c]), ["task_id", key, c])
            problems += problem_if(file, c, f"set for a task without {key}", tasks, ~np.isnan(values[c]) & ~has, ["task_id", key, c])
    problems += problem_if(file, "rt_goal_s", "must be > 0 seconds", tasks, values["rt_goal_s"] <= 0, ["task_id", "rt_goal_s"])
    problems += problem_if(file, "request_rate", "must be >= 0 requests/s", tasks, values["request_rate"] < 0, ["task_id", "request_rate"])
    problems += problem_if(file, "service_core_s", "must be > 0 core-seconds", tasks, values["service_core_s"] <= 0, ["task_id", "service_core_s"])
    problems += problem_if(file, "work_core_s", "must be >= 0 core-seconds", tasks, values["work_core_s"] < 0, ["task_id", "work_core_s"])
    problems += problem_if(file, "goal_start_s", "must be before deadline_s", tasks, values["goal_start_s"] >= values["deadline_s"],
                           ["task_id", "goal_start_s", "deadline_s"])
    both = ~np.isnan(values["rt_goal_s"]) & ~np.isnan(values["deadline_s"])
    problems += problem_if(file, "rt_goal_s, deadline_s", "a task is either transactional or batch, not both", tasks, both, ["task_id", "rt_goal_s", "deadline_s"])
    return problems
