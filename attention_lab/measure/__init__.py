"""Measurement: what a call should cost (:mod:`.cost`), exact peak memory (:mod:`.memory`, :mod:`.memory_report`),
the one timer (:mod:`.timing`) and the conclusions drawn from its figures (:mod:`.conclusions`), the committed benchmark
results (:mod:`.results`) and the long-range benchmark harness (:mod:`.long_range`). Imported as modules:
``from attention_lab.measure.memory import measure_peak_memory``."""
