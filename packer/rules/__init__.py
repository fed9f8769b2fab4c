"""Rules (hard constraints) and goals (weighted objective terms): the plugins every solver understands (:mod:`packer.rules.base`)."""
from packer.rules.anti_affinity import AntiAffinity
from packer.rules.at_risk import MaxNewAtRisk
from packer.rules.base import STRATEGIES, Goal, Rule
from packer.rules.budget import MoveBudget
from packer.rules.capacity import Capacity
from packer.rules.cost import Cost
from packer.rules.eligibility import Eligibility, Pins
from packer.rules.fragmentation import Fragmentation
from packer.rules.interference import Interference
from packer.rules.min_rp import MinRP
from packer.rules.moves import FewerMoves
from packer.rules.spread import Spread

__all__ = ["STRATEGIES", "AntiAffinity", "Capacity", "Cost", "Eligibility", "FewerMoves", "Fragmentation", "Goal", "Interference",
           "MaxNewAtRisk", "MinRP", "MoveBudget", "Pins", "Rule", "Spread"]
