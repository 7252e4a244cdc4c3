"""Running a study: the checks before the first launch (`preflight.py`), one trial's launch and probes
(`trial.py`), the driver that lets the search choose trial after trial (`driver.py`), the confirmation's
interleaved launches (`confirm.py`), the cost-profile launches (`profiling.py`), what a study will cost before it
runs (`plan.py`), and what a killed driver left behind (`recovery.py`)."""
