"""Options, argument types and progress bars shared by the ``packer`` commands.

The rule options (:func:`rule_options`) are shared by ``packer solve`` and ``packer
sweep``: they reach the command as one :class:`~packer.model.build.RuleOptions`, the
flags laid over a ``--constraints`` file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import sys
from pathlib import Path
from typing import Callable, Iterator

import click
from click.core import ParameterSource

from packer.io.constraints import read_constraints
from packer.io.presets import DEFAULT_PRESETS, load_presets
from packer.io.resources import SAMPLE_NAME, sample_trace
from packer.model.build import RuleOptions
from packer.model.rpf import RP_CAP, RP_FLOOR


def default_out(trace: Path, name: str) -> Path:
    """Where a step writes when no --out is given: ``out/<trace name>/<name>`` under the working folder."""
    return Path("out") / Path(trace).resolve().name / name


def progress_bar(label: str, length: int):
    """A click progress bar on stderr (hidden when stderr is not a terminal)."""
    return click.progressbar(length=length, label=label, file=sys.stderr, show_eta=True, show_percent=True)


@contextlib.contextmanager
def quiet_dask_logs() -> Iterator[None]:
    """Unless -v: hide Dask's routine log lines (cluster start and stop at INFO, a WARNING whenever a shuffle
    starts or ends), which would otherwise reach packer's log handler; its errors still show."""
    levels = {"distributed": logging.WARNING, "distributed.shuffle": logging.ERROR}
    before = {name: logging.getLogger(name).level for name in levels}
    if not logging.getLogger().isEnabledFor(logging.INFO):
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


class LazyProgressBar:
    """A :func:`progress_bar` opened on its first update: for work a library call may or may not do.

    ``packer solve`` profiles usage only when its configuration needs profiles; the bar
    (and the row count it needs, ``length()``) appears only then. Used as a context
    manager, it yields the ``update(rows)`` callback to hand to the library. ``then``:
    a line to print when the bar is full, naming the silent work that follows.
    """

    def __init__(self, label: str, length: Callable[[], int], then: str | None = None):
        self.label, self.length, self.then = label, length, then
        self.bar = None
        self.done = False

    def update(self, n: int) -> None:
        """Advance by ``n``, opening the bar first if this is the first update."""
        if self.bar is None:
            self.bar = progress_bar(self.label, self.length()).__enter__()
        self.bar.update(n)
        if self.then and not self.done and self.bar.pos >= self.bar.length:
            self.done = True
            self.bar.__exit__(None, None, None)
            click.echo(self.then, err=True)

    def __enter__(self) -> Callable[[int], None]:
        return self.update

    def __exit__(self, *exc) -> None:
        if self.bar is not None and not self.done:
            self.bar.__exit__(*exc)


class MaxMoves(click.ParamType):
    """A move budget: a whole number >= 0, or ``unlimited`` (None)."""

    name = "N|unlimited"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value is None:
            return value
        if str(value).lower() in ("unlimited", "none", "inf"):
            return None
        try:
            n = int(value)
        except ValueError:
            self.fail(f"expected a number of moves or 'unlimited', got {value!r}", param, ctx)
        if n < 0:
            self.fail(f"must be >= 0 or 'unlimited', got {n}", param, ctx)
        return n


class PresetName(click.Choice):
    """A configuration preset of models/presets.toml (Table IV), in any case, with ``_`` or ``-``."""

    def __init__(self):
        super().__init__(list(load_presets(DEFAULT_PRESETS)), case_sensitive=False)

    def convert(self, value, param, ctx):
        name = str(value).strip().lower().replace("_", "-").replace(" ", "-")
        if name not in self.choices:
            self.fail(f"unknown config '{value}'; known: {', '.join(self.choices)}", param, ctx)
        return name


class ServicePair(click.ParamType):
    """Two service names separated by a comma (``A,B``), as a tuple."""

    name = "A,B"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = tuple(part.strip() for part in str(value).split(","))
        if len(names) != 2 or not all(names):
            self.fail(f"expected two service names separated by a comma (A,B; A,A keeps A's tasks apart), got {value!r}", param, ctx)
        return names


def positive_seconds(ctx, param, value):
    """Callback of --time-limit: a finite number of seconds > 0 (``inf`` would never stop, ``nan`` would skip the search)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"must be > 0 seconds and finite, got {value:g}")
    return value


class TraceFolder(click.Path):
    """A trace folder, or ``packer:sample`` for the sample trace shipped with packer (wherever it is installed)."""

    def __init__(self):
        super().__init__(exists=True, file_okay=False, path_type=Path)

    def convert(self, value, param, ctx):
        if value == SAMPLE_NAME:
            return sample_trace()
        return super().convert(value, param, ctx)


trace_arg = click.argument("trace", type=TraceFolder())
fleet_opt = click.option(
    "--fleet",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Fleet catalog (TOML). Default: the trace's own fleet.toml, else models/fleet.toml.",
)
def skip_opt(command):
    """``--skip-invalid`` (hidden old spelling ``--skip-invalid-usage``): the command receives ``skip_invalid_usage``."""

    @functools.wraps(command)
    def with_skip(*args, skip_invalid: bool, skip_invalid_usage_old: bool, **kwargs):
        return command(*args, skip_invalid_usage=skip_invalid or skip_invalid_usage_old, **kwargs)

    with_skip = click.option("--skip-invalid-usage", "skip_invalid_usage_old", is_flag=True, hidden=True)(with_skip)
    return click.option("--skip-invalid", "skip_invalid", is_flag=True,
                        help="Drop invalid usage rows (unknown task, NaN, negative, implausible) instead of failing; the counts "
                             "are reported.")(with_skip)


def cluster_options(command):
    """``--workers N`` / ``--scheduler ADDRESS`` (at most one): run on Dask (:mod:`packer.distributed`). The command
    receives ``workers`` and ``scheduler``, both None for the local engine."""

    @functools.wraps(command)
    def with_cluster(*args, workers: int | None, scheduler: str | None, **kwargs):
        if workers is not None and scheduler is not None:
            raise click.UsageError("--workers starts a local Dask cluster and --scheduler uses a running one: give one of them")
        return command(*args, workers=workers, scheduler=scheduler, **kwargs)

    with_cluster = click.option("--scheduler", metavar="ADDRESS", default=None,
                                help="Run on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); its workers need "
                                     "packer installed. Needs packer[dask].")(with_cluster)
    return click.option("--workers", type=click.IntRange(min=1), default=None,
                        help="Run on a local Dask cluster of N single-threaded worker processes. Needs packer[dask].")(with_cluster)


def sensitivity_opts(command):
    """--sensitivity-basis, --class-scores and --classes-from: how sensitivity scores are read and assigned."""
    command = click.option(
        "--classes-from", "classes_from", type=click.Path(exists=True, path_type=Path), default=None,
        help="Keep the workload classes of an earlier characterization (its folder or classes.parquet): each task takes "
             "the nearest of its class centres instead of a new K-means fit, so classes and their scores stay stable.")(command)
    command = click.option(
        "--class-scores", "class_scores", type=click.Choice(["mean", "max"]), default="mean", show_default=True,
        help="A class's scores from its measured services: their mean (the paper: tasks of a class behave alike) "
             "or their maximum (conservative).")(command)
    return click.option(
        "--sensitivity-basis", "sensitivity_basis", type=click.Choice(["need", "host"]), default="need", show_default=True,
        help="What a sensitivity score is a fraction of. need: the task's own requested need, so a host is within its "
             "limit while the summed score x share-of-host stays <= 1 (the paper's Section III-C); host: the whole "
             "host, so the summed scores stay <= 1.")(command)


#: The rule flags, named as RuleOptions' fields; --anti-affinity and --constraints are handled apart.
_RULE_FLAGS = ("max_moves", "spread_host", "spread_domain", "min_rp", "max_new_at_risk")

_RULE_OPTIONS = (
    click.option("--max-moves", type=MaxMoves(), default=str(RuleOptions().max_moves), show_default=True,
                 help="At most this many tasks leave their host (in a sweep: in every solve); 'unlimited' for a full repack "
                      "(capacity planning)."),
    click.option("--spread-host", type=click.IntRange(min=1), default=None, help="At most N tasks of one job per host (on hosts that gain tasks)."),
    click.option("--spread-domain", type=click.IntRange(min=1), default=None,
                 help="At most N tasks of one job per failure domain (on domains that gain tasks)."),
    click.option("--min-rp", type=click.FloatRange(RP_FLOOR, RP_CAP), default=None,
                 help=f"Guard: every task keeps relative performance >= X, a number from {RP_FLOOR:g} to {RP_CAP:g} "
                      "(0 = at goal, 1 = the best; a task already below X gets no worse)."),
    click.option("--max-new-at-risk", type=click.IntRange(min=0), default=None,
                 help="Guard: at most N more tasks at risk of interference (on hosts whose summed sensitivity exceeds 1, "
                      "Eq. 4) than now; 0 frees cost without adding SLO risk. Needs --config p99-sens; engine solver."),
    click.option("--anti-affinity", "anti_affinity", type=ServicePair(), multiple=True,
                 help="Tasks of services A and B never share a host they gain (A,A keeps A's tasks apart); repeat for several pairs."),
    click.option("--constraints", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                 help="Constraints file (TOML: max_moves, spread_host, spread_domain, min_rp, max_new_at_risk, anti_affinity); "
                      "flags given override its values, anti-affinity pairs of both apply."),
)


def rule_options(command):
    """Add the rule flags and --constraints to ``command``, which receives them as one ``rules`` (:func:`rules_from`)."""

    @functools.wraps(command)
    def with_rules(*args, **kwargs):
        flags = {name: kwargs.pop(name) for name in _RULE_FLAGS}
        rules = rules_from(click.get_current_context(), flags, kwargs.pop("anti_affinity"), kwargs.pop("constraints"))
        return command(*args, rules=rules, **kwargs)

    for option in reversed(_RULE_OPTIONS):
        with_rules = option(with_rules)
    return with_rules


def rules_from(ctx: click.Context, flags: dict, anti_affinity: tuple[tuple[str, str], ...], constraints: Path | None) -> RuleOptions:
    """The rules of the flags laid over the constraints file: a flag given on the command line wins, pairs add up."""
    rules = RuleOptions(**flags, anti_affinity=anti_affinity)
    if constraints is None:
        return rules
    given = {name: value for name, value in flags.items() if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT}
    # The file's values replace the flags' defaults (read_constraints keeps our pairs and adds its own).
    return dataclasses.replace(read_constraints(constraints, base=rules), **given)

