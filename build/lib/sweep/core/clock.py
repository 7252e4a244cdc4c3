"""What specsweep's simulated servers say beyond an engine's API: how far their clock fell behind.

A simulated server sleeps to each step's modelled end at its time scale; a host that cannot keep the scale wakes
it late, and the probe then measures the host's pace. The simulator counts it and serves the counts at CLOCK_PATH
(no engine has the path: a real server answers 404 and nothing is read)."""

from __future__ import annotations

CLOCK_PATH = "/specsweep/clock"  # JSON: time_scale, modelled_s, late_s, requests, late_requests
# A request that ends this share of its modelled decode time behind the clock was not simulated at its scale;
# a workload whose requests ran this share late was measured on a host too slow for it (`HostLoad.lagged`).
LATE_SHARE = 0.1
