"""Errors the command line reports in one line (exit status 2), never as a traceback."""


class UserError(Exception):
    """A problem with the user's input or files, explained in one line."""
