"""Importers that turn public traces into packer's native trace format."""
from packer.io.importers.bitbrains import import_bitbrains
from packer.io.importers.openb import import_openb
from packer.io.importers.summary import ImportSummary

__all__ = ["ImportSummary", "import_bitbrains", "import_openb"]
