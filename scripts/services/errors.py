"""The error every part of the local services reports a failure with."""


class ServiceError(RuntimeError):
    """A service could not be started or checked; the message says what to do."""
