"""Models and training: the tiny Transformer (:mod:`.transformer`), toy tasks (:mod:`.tasks`), the training loop
(:mod:`.training`) and its learning-rate schedule (:mod:`.schedule`). Imported as modules:
``from attention_lab.models.training import train``."""
