"""Relational table schemas as values, and the timeline of how they changed."""
