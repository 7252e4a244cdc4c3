"""The model as its files say it is: reading GGUF, config.json and safetensors headers (`files.py`), the geometry
those files give (`geometry.py`), a draft held against its target (`draft.py`), and the doctor (`doctor.py`):
what a launch's KV pool and CUDA graphs should be for it, and the findings where an engine's numbers disagree."""
