"""Change events as values: the order key, the envelope, transaction metadata."""
