"""Whether what a server wrote is text (`health.py`: loops, echoes, template tokens, runaways) and whether a
configuration's answers are the baseline's (`fidelity.py`: output checks, near-ties). Rules on text alone: the
records store their verdicts."""
