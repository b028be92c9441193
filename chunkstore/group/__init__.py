"""The Group class (``group.py``) and its helpers: opening (``opening``: modes, the
group's document, its consolidated snapshot), new members (``members``, ``like_args``),
drawing the tree, scratch arrays of rechunk runs."""
