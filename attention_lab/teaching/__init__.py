"""Teaching: exercise checks, one module per lesson (:mod:`.checks`), and student copies of the lessons
(:mod:`.classroom`, ``python -m attention_lab.teaching.classroom``)."""
