"""Plans: placement and ordered moves, their summary and context, and the independent verifier."""
