"""The ``packer`` command line."""
from packer.cli.commands import cli, main

__all__ = ["cli", "main"]
