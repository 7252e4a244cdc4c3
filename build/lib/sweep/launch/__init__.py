"""A server's life on this machine: started in its own session (`server.py`, through `_session_exec.py`), found
wherever its processes went and stopped with all of them (`processes.py`), and watched while it is measured:
the rest of the host's CPU (`host.py`) and the GPU memory its processes hold (`gpu.py`)."""
