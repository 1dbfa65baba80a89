"""User-facing errors: the message says which file or option, which field, what was expected."""


class UserError(Exception):
    exit_code = 2
