"""The model as its files say it is: reading GGUF, config.json and safetensors headers (`files.py`), and the
doctor (`doctor.py`): the geometry those files give, what a launch's KV pool, draft and CUDA graphs should be
for it, and the findings where an engine's numbers disagree with that truth."""
