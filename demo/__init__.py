"""`make demo`: the main job end to end on the local stack (see demo/run.py)."""
