"""The ``packer`` command group: logging, the commands, and what each error exits with.

Every user mistake (bad flag, bad file, unknown name) ends with a message naming
what is wrong and exit code 2; an infeasible instance exits with 3, an exact solve
that finds no placement in time with 4. Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import logging
import sys

import click

from packer.cli.kubernetes_commands import export_group, import_kubernetes_cmd
from packer.cli.plan_commands import solve, verify
from packer.cli.sweep_commands import report, sweep
from packer.cli.trace_commands import characterize, generate, import_group, profile, validate
from packer.errors import InfeasibleError, InputError, NoPlanError


class _Group(click.Group):
    """Turns packer's errors into a message and their exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as exc:
            click.secho("error: " + str(exc).replace("\n", "\nerror: "), fg="red", err=True)
            ctx.exit(exc.exit_code)
        except InfeasibleError as exc:
            click.secho(f"infeasible: {exc}", fg="red", err=True)
            ctx.exit(exc.exit_code)
        except NoPlanError as exc:
            click.secho(f"no plan: {exc}", fg="red", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="packer")
def cli(verbose: int) -> None:
    """Repack datacenter tasks onto a heterogeneous fleet.

    \b
    Pipeline: generate/import a trace -> profile (p99 usage) -> characterize
    (workload classes, sensitivity) -> solve (a verified placement plan).
    TRACE is a trace folder, or packer:sample for the sample trace packer
    ships (e.g. `packer solve packer:sample`). Run `packer COMMAND --help`
    for each step.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


for _command in (validate, profile, characterize, generate, import_group, solve, verify, sweep, report):
    cli.add_command(_command)
import_group.add_command(import_kubernetes_cmd)
cli.add_command(export_group)


def main() -> None:
    """The console script ``packer``."""
    cli(prog_name="packer")
