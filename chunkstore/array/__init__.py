"""The Array class (``array.py``) and the helpers beside it: selection, resize, info, the
copy of lazy values into an array (``copy``, ``sources``, ``hdf5_files``)."""
