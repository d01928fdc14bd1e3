"""Models and training: the tiny Transformer (:mod:`.transformer`) and the attentions it trains with
(:mod:`.attention_choice`), toy tasks (:mod:`.tasks`, :mod:`.long_range_tasks`), the training loop (:mod:`.training`)
and its learning-rate schedule (:mod:`.schedule`), decoding (:mod:`.generate`). Imported as modules:
``from attention_lab.models.training import train``."""
