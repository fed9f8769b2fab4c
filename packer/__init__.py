"""packer: repack datacenter tasks onto a heterogeneous fleet."""
# OR-Tools and highspy (imported by PuLP) each bundle libhighs; whichever loads first
# wins, and CP-SAT fails if it is not OR-Tools. Load OR-Tools before anything imports PuLP.
from ortools.sat.python import cp_model as _cp_model  # noqa: F401
from packer.errors import InfeasibleError, InputError, Problem
from packer.io.fleet import Fleet, load_fleet
from packer.io.presets import Preset, get_preset, load_presets
from packer.io.trace import Trace, read_trace, write_trace

__all__ = [
    "Fleet",
    "InfeasibleError",
    "InputError",
    "Preset",
    "Problem",
    "Trace",
    "get_preset",
    "load_fleet",
    "load_presets",
    "read_trace",
    "write_trace",
]
