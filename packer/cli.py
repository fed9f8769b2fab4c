"""The ``packer`` command line: thin wrappers that read inputs, call the library and print.

Every user mistake (bad flag, bad file, unknown name) ends with a message naming
what is wrong and exit code 2; an infeasible instance exits with 3.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from packer.errors import InfeasibleError, InputError


class _Group(click.Group):
    """Turns :class:`InputError` / :class:`InfeasibleError` into a message and an exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as exc:
            click.secho("error: " + str(exc).replace("\n", "\nerror: "), fg="red", err=True)
            ctx.exit(exc.exit_code)
        except InfeasibleError as exc:
            click.secho(f"infeasible: {exc}", fg="red", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="packer")
def cli(verbose: int) -> None:
    """Repack datacenter tasks onto a heterogeneous fleet.

    \b
    Pipeline: generate/import a trace -> profile (p99 usage) -> characterize
    (workload classes, sensitivity) -> solve (a verified placement plan).
    Run `packer COMMAND --help` for each step.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def default_out(trace: Path, name: str) -> Path:
    """Where a step writes when no --out is given: ``out/<trace name>/<name>`` under the working folder."""
    return Path("out") / Path(trace).resolve().name / name


def main() -> None:
    cli(prog_name="packer")
