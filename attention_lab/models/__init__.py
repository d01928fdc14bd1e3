"""Models and training: the tiny Transformer (:mod:`.transformer`) and the attentions it trains with
(:mod:`.attention_choice`), toy tasks (:mod:`.tasks`, :mod:`.long_range_tasks`), the training loop (:mod:`.training`)
and its learning-rate schedule (:mod:`.schedule`), decoding (:mod:`.generate`), real text for a small GPT
(:mod:`.text_corpus`: the standard library's source as characters, and the count baselines), images (:mod:`.vision`:
patches, a tiny ViT and a CNN; :mod:`.conv_attention`: a convolution as attention heads; :mod:`.digits`:
scikit-learn's digits and their training). Imported as modules:
``from attention_lab.models.training import train``."""
