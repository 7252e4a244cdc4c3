"""The morning dashboard, one module per panel set: `frame.py` (what panels are built on), `speed.py`, `load.py`,
`hardware.py`, `study.py`, and `page.py` (the recommendations and the page that holds every panel: `build`)."""
