"""Measurement: exact peak memory (:mod:`.memory`) and timing sweeps (:mod:`.bench`). Imported as modules:
``from attention_lab.measure import memory``."""
