"""What every command's options share: the parser (one error line, exit 2), the help layout
(defaults, exit codes, an example), validators that reject bad values at parse time, and output
paths checked before any work starts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pubsubguard.core.errors import UserError

INTERRUPTED = (130, "interrupted (Ctrl-C or SIGTERM)")


class Parser(argparse.ArgumentParser):
    """An argument error is one line naming the option and what was expected, then exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an option the chosen command does not know is that command's error: it
        names the option it looks like and points at the command's own `--help`."""
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            parser = self._command_parser(getattr(parsed, "command", None)) or self
            parser.error(f"unrecognized arguments: {' '.join(unknown)}{_meant(parser, unknown)}")
        return parsed

    def _command_parser(self, command: str | None):
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                return action.choices[command]
        return None


def _meant(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """"; did you mean --format?" for the first unknown option that looks like one the parser has."""
    import difflib

    known = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
    for word in unknown:
        if word.startswith("-"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default in its help, unless the help already says it or there is none to say."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default:" in text or "%(default)" in text or not action.option_strings:
            return text
        if action.default in (None, False, argparse.SUPPRESS) or isinstance(action, (argparse._HelpAction, argparse._StoreConstAction)):
            return text
        return f"{text} (default: %(default)s)"


def epilog(exit_codes: dict[int, str], example: str) -> str:
    codes = "\n".join(f"  {code:<4}{text}" for code, text in sorted({**exit_codes, INTERRUPTED[0]: INTERRUPTED[1]}.items()))
    return f"exit codes:\n{codes}\n\nexample:\n  {example}"


def description(help: str) -> str:
    """A command's one-line help as the sentence `--help` opens with: capitalised, ending in one stop
    (a question keeps its question mark)."""
    return help[0].upper() + help[1:] + ("" if help.endswith((".", "?", "!")) else ".")


def add_command(subparsers, name: str, help: str, exit_codes: dict[int, str], example: str, **kwargs):
    return subparsers.add_parser(
        name, help=help, description=description(help), epilog=epilog(exit_codes, example),
        formatter_class=HelpFormatter, **kwargs,
    )


# --- Values ---------------------------------------------------------------------------------------
from pubsubguard.core.arguments import (  # noqa: F401  (the commands' argument types, shared with the job)
    input_file, non_negative_int, or_checkpoint, output_directory, output_file, port, positive_int, positive_seconds,
    remote_location, remote_or, require_writable, writable_problem,
)


def write_text(path: Path, text: str, option: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as err:
        raise UserError(f"{option} {path}: cannot write ({err.strerror or err})") from None


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
