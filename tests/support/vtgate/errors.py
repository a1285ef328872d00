"""How the double's failures reach a VStream client: a gRPC status code and Vitess's own
message, so a client's error handling is tested against the texts it will meet.

VTGate ends a VStream with `vterrors.ToGRPC(err)`: the status code follows the vtrpc code
and the message is kept. Errors raised by a shard's tablet reach VTGate through the
tablet's gRPC connection, which prefixes them with `vttablet: rpc error: code = <Code>
desc = ` (`tabletconn.ErrorFromGRPC`); VTGate's own errors have no prefix."""

from __future__ import annotations

import grpc

# Go's names of the gRPC codes, as `rpc error: code = X` prints them.
_GO_NAMES = {
    grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
    grpc.StatusCode.UNKNOWN: "Unknown",
    grpc.StatusCode.INTERNAL: "Internal",
    grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
    grpc.StatusCode.UNAVAILABLE: "Unavailable",
    grpc.StatusCode.CANCELLED: "Canceled",
}


class VStreamError(Exception):
    """Ends a VStream call with `code` and `message` (the first error of any shard wins)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def tablet_error(code: grpc.StatusCode, message: str) -> VStreamError:
    """An error a shard's tablet returned, as VTGate passes it on."""
    return VStreamError(
        code, f"vttablet: rpc error: code = {_GO_NAMES.get(code, 'Unknown')} desc = {message}"
    )


def stream_error(
    position: str, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
) -> VStreamError:
    """A binlog stream's failure (`vstreamer.wrapError`): where it was when it failed."""
    return tablet_error(code, f"stream (at source tablet) error @ {position}: {message}")


def shard_server_error(exc: Exception, position: str) -> VStreamError:
    """A shard server's error under a binlog stream: a lost server is UNAVAILABLE (VTGate
    retries on another tablet; a client reconnects from its last VGTID), anything else,
    such as 1236 for binlogs purged, UNKNOWN with MySQL's text."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    message = str(exc.args[-1]) if exc.args else str(exc)
    if code in (0, 2003, 2006, 2013):
        return stream_error(position, message, grpc.StatusCode.UNAVAILABLE)
    return stream_error(position, f"{message} (errno {code}) (sqlstate HY000)")
