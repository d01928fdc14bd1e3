"""Models and training: the tiny Transformer (:mod:`.transformer`), toy tasks (:mod:`.tasks`) and the training
loop (:mod:`.training`). Imported as modules: ``from attention_lab.models.training import train``."""
