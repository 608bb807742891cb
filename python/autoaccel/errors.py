"""The exceptions the client raises.

Every error the coordinator answers is an `AutoaccelError` subclass chosen by
its gRPC status code, carrying the server's own message; the common ones also
derive from the built-in exception a Python caller would catch (ValueError,
LookupError, PermissionError, ConnectionError, TimeoutError). Errors of the
CLI behind `Client.export` and `Client.estimate` are raised the same way.

Standard library only: importable without grpcio.
"""

from typing import Any, Optional


class AutoaccelError(Exception):
    """An autoaccel call failed.

    `code`: the gRPC status code's name ("NOT_FOUND", ...), or None for an
    error that did not come from the coordinator (the CLI, a local file);
    `message`: the server's (or the CLI's) message, as it gave it.
    """

    code: Optional[str] = None

    def __init__(self, message: str, code: Optional[str] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return "%s: %s" % (self.code, self.message) if self.code else self.message


class InvalidArgumentError(AutoaccelError, ValueError):
    """INVALID_ARGUMENT: the request names a bad value (the message says which
    field and what is allowed); also bad input refused by the CLI (exit 2)."""
    code = "INVALID_ARGUMENT"


class NotFoundError(AutoaccelError, LookupError):
    """NOT_FOUND: no such job (or trial)."""
    code = "NOT_FOUND"


class AlreadyExistsError(AutoaccelError):
    """ALREADY_EXISTS."""
    code = "ALREADY_EXISTS"


class UnauthenticatedError(AutoaccelError, PermissionError):
    """UNAUTHENTICATED: no token, or one the coordinator does not know."""
    code = "UNAUTHENTICATED"


class PermissionDeniedError(AutoaccelError, PermissionError):
    """PERMISSION_DENIED: the job is another user's (only its owner and admins
    may read or cancel it)."""
    code = "PERMISSION_DENIED"


class ResourceExhaustedError(AutoaccelError):
    """RESOURCE_EXHAUSTED: the request is over one of the coordinator's size or
    count limits, or its disk is full."""
    code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(AutoaccelError):
    """FAILED_PRECONDITION: the coordinator cannot do it in its present state."""
    code = "FAILED_PRECONDITION"


class UnavailableError(AutoaccelError, ConnectionError):
    """UNAVAILABLE: the coordinator cannot be reached (wrong address, down,
    plaintext against a TLS port), or a watch gave up reconnecting."""
    code = "UNAVAILABLE"


class DeadlineExceededError(AutoaccelError, TimeoutError):
    """DEADLINE_EXCEEDED: no answer within the call's timeout, or a watch's
    timeout ran out (the job keeps running)."""
    code = "DEADLINE_EXCEEDED"


class CancelledError(AutoaccelError):
    """CANCELLED: the call was cancelled (e.g. the coordinator shut down)."""
    code = "CANCELLED"


class NoStrategyError(AutoaccelError, LookupError):
    """There is no strategy to give: the job has no best yet (`export`)."""


class ExportRejectedError(AutoaccelError, ValueError):
    """The framework refuses the strategy (`export`): `result.fidelity` has the
    rows marked "rejected"; no file was written."""

    def __init__(self, message: str, result: Any):
        super().__init__(message)
        self.result = result


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotFoundError, AlreadyExistsError, UnauthenticatedError,
    PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError, UnavailableError,
    DeadlineExceededError, CancelledError)}


def error_for_code(code: str, message: str) -> AutoaccelError:
    """The exception for the gRPC status code named `code` ("NOT_FOUND"), with
    `message`; an `AutoaccelError` with that code for any other code."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return AutoaccelError(message, code)
    return cls(message)
