"""Teaching: exercise checks, one module per lesson (:mod:`.checks`), student copies of the lessons
(:mod:`.classroom`, ``python -m attention_lab.teaching.classroom``) and how lessons print small tensors
(:mod:`.display`)."""
