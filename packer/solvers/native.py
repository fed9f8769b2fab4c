"""Loads OR-Tools, whose HiGHS must not be taken over by another copy of HiGHS in the process.

packer's native solvers all come with OR-Tools (CP-SAT, GLOP, SCIP, HiGHS) and PuLP
(its bundled CBC, run as a program). A second HiGHS can still be in the process:
when ``highspy`` is installed, ``import pulp`` loads highspy's library into the
*global* symbol scope (PuLP does so on purpose, for its own HiGHS interface). A
library loaded after that binds its calls to HiGHS's exported functions to that
copy first, so OR-Tools loaded then runs highspy's HiGHS (another version) on its
own data structures and crashes the process at the first HiGHS solve.

This module is imported first by :mod:`packer.solvers`. When it finds HiGHS in the
global scope before OR-Tools is loaded (Linux; elsewhere libraries do not interpose
this way), it loads OR-Tools with ``RTLD_DEEPBIND``, so that OR-Tools binds to its own
HiGHS; both copies then work side by side. OR-Tools already loaded by the caller
before packer keeps the bindings it was given then.
"""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

#: A symbol every HiGHS build exports (``Highs::run()``): in the global scope only if some library put HiGHS there.
_HIGHS_SYMBOL = "_ZN5Highs3runEv"


def _highs_in_global_scope() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), _HIGHS_SYMBOL)
    except OSError:
        return False


def _ortools_loaded() -> bool:
    maps = Path("/proc/self/maps")
    return maps.exists() and "/ortools/" in maps.read_text()


#: Whether packer loaded OR-Tools with its own symbols first because another HiGHS was in the global scope (module doc).
ISOLATED_ORTOOLS = (sys.platform == "linux" and hasattr(os, "RTLD_DEEPBIND")
                    and _highs_in_global_scope() and not _ortools_loaded())

_flags = sys.getdlopenflags()
if ISOLATED_ORTOOLS:
    sys.setdlopenflags(_flags | os.RTLD_DEEPBIND)
try:
    # The OR-Tools extensions packer uses; loading them loads OR-Tools' native libraries, HiGHS among them.
    from ortools.math_opt.python import mathopt  # noqa: E402,F401
    from ortools.sat.python import cp_model  # noqa: E402,F401
finally:
    sys.setdlopenflags(_flags)
