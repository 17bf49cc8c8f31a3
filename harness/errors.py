"""The one base class for errors a user caused and can fix: the CLI prints them as one line
(``error: ...``, exit status 2), never a traceback. Tasks, backends and the core raise subclasses
(or plain ``UserError``) for bad options, missing files, unknown names and the like."""


class UserError(Exception):
    """A one-line, user-fixable error."""


class RunConfigError(UserError, ValueError):
    """A run cannot start: bad options, modality mismatch, name clash."""
