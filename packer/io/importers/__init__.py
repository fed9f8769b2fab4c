"""Importers that turn public traces into packer's native trace format."""
from packer.io.importers.alibaba2018 import import_alibaba2018
from packer.io.importers.bitbrains import import_bitbrains
from packer.io.importers.google2019 import import_google2019
from packer.io.importers.kubernetes import import_kubernetes
from packer.io.importers.openb import import_openb
from packer.io.importers.summary import ImportSummary

__all__ = ["ImportSummary", "import_alibaba2018", "import_bitbrains", "import_google2019", "import_kubernetes", "import_openb"]
