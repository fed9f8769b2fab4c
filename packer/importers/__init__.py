"""Importers that turn public traces into packer's native trace format."""
from packer.importers.bitbrains import import_bitbrains
from packer.importers.openb import import_openb
from packer.importers.summary import ImportSummary

__all__ = ["ImportSummary", "import_bitbrains", "import_openb"]
