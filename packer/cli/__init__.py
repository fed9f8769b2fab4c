"""The ``packer`` command line (:mod:`packer.cli.main`); the console script is :func:`main`."""
from packer.cli.main import cli, main

__all__ = ["cli", "main"]
