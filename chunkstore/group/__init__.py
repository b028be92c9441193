"""The Group class (``group.py``) and its helpers: creating members (``members``,
``like_args``), drawing the tree, scratch arrays of rechunk runs."""
