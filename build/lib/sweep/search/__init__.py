"""The search: which configurations can launch (`candidates.py`), the surface model of speed and acceptance over
them (`surface.py`), the cost profile of step times it may read (`costs.py`), and the model-guided choice of the
next launch and of the confirmation's picks (`guided.py`); imported from here."""

from __future__ import annotations

from sweep.search.candidates import GRID_LIMIT, Candidate, Candidates, candidates, launch_key
from sweep.search.guided import Doubt, ModelSearch, Picks, acceptance_launches, axes, diverse, in_doubt

__all__ = [
    "GRID_LIMIT",
    "Candidate",
    "Candidates",
    "Doubt",
    "ModelSearch",
    "Picks",
    "acceptance_launches",
    "axes",
    "candidates",
    "diverse",
    "in_doubt",
    "launch_key",
]
