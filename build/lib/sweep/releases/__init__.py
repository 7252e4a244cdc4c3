"""What each engine release accepts and does, read from its own source: the flag tables (`tables/`, made from the
released Python by `sglang.py` and `vllm.py`), where a release's source is found (`sources.py`), and SGLang's
rules (`sglang_rules.py`: its speculative families, defaults and checks). Engine knowledge, shared by the engine
adapters (`sweep/engines`) and the simulator (`sweep/sim`), which import nothing else of specsweep but `core`."""
