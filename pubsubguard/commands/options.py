"""What every command's options share: the parser (one error line, exit 2), the help layout
(defaults, exit codes, an example), validators that reject bad values at parse time, and output
paths checked before any work starts; the options every command shares (`-C/--cwd` the project, `-s/--stack`,
how the program's process runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pubsubguard.core.errors import INTERRUPTED_EXIT, UserError

INTERRUPTED = (INTERRUPTED_EXIT, "interrupted (Ctrl-C or SIGTERM)")


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


# --- the options every command shares: the project (-C), the stack (-s), the program's process ----
def project_directory(text: str) -> Path:
    """`-C/--cwd DIR`: an existing directory, resolved (the project: Pulumi.yaml, stacks, state)."""
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory (expected the project directory holding Pulumi.yaml)")
    return path.resolve()


def add_project_argument(parser) -> None:
    parser.add_argument(
        "-C", "--cwd", "--root", dest="root", type=project_directory, default=".", metavar="DIR",
        help="project directory holding Pulumi.yaml and Pulumi.<stack>.yaml (--root is an alias); other "
             "relative paths stay relative to where you run the command (default: the current directory)",
    )


def stack_name(text: str) -> str:
    """`-s/--stack NAME`: a Pulumi stack name (letters, digits, `-`, `_`, `.`; an `org/project/` prefix is
    allowed and the last part names the stack file)."""
    name = text.rsplit("/", 1)[-1]
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name in (".", ".."):
        raise argparse.ArgumentTypeError(f"expected a stack name (letters, digits, -, _ or .), got {text!r}")
    return name


def add_stack_arguments(parser) -> None:
    parser.add_argument("-s", "--stack", default="dev", type=stack_name,
                        help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    add_project_argument(parser)


def env_name(text: str) -> str:
    if not text or "=" in text or not text.replace("_", "a").isalnum():
        raise argparse.ArgumentTypeError(f"expected an environment variable's name, got {text!r}")
    return text


def add_program_arguments(parser) -> None:
    """How the program runs (pubsubguard.core.langhost_python, langhost): its Python, its environment, its limits."""
    from pubsubguard.core.recorder import Limits

    defaults = Limits()
    group = parser.add_argument_group("the program's process (see docs/security.md)")
    group.add_argument("--python", metavar="PATH",
                       help="run the program with this Python (default: as Pulumi finds it: runtime.options."
                            "virtualenv or toolchain in Pulumi.yaml, an active VIRTUAL_ENV, python3 on PATH)")
    group.add_argument("--pass-env", action="append", default=[], type=env_name, metavar="NAME",
                       help="pass this environment variable to the program (repeatable; default: only PATH, "
                            "locale and time zone)")
    group.add_argument("--timeout", type=positive_seconds, default=defaults.timeout_s, metavar="SECONDS",
                       help="stop a program still running after this many seconds")
    group.add_argument("--memory-limit", type=positive_int, default=defaults.memory_mib, metavar="MIB",
                       help="the program's memory (data segment) limit in MiB")
    group.add_argument("--max-resources", type=positive_int, default=defaults.max_resources, metavar="N",
                       help="stop a program that registers more resources than this")
    group.add_argument("--max-input-bytes", type=positive_int, default=defaults.max_input_bytes,
                       metavar="BYTES", help="stop a program one of whose resources has larger inputs")
    group.add_argument("--require-isolation", action="store_true",
                       help="exit 2 where the program cannot be confined (no bubblewrap, or no namespaces)")
    group.add_argument("--show-secrets", action="store_true",
                       help="show secret values in the output and plan (default: [secret], as Pulumi)")


def add_environment_values_argument(parser) -> None:
    """`--environment-values FILE`, as `check` and `plan` take it (read by `plan.read_inputs`)."""
    parser.add_argument(
        "--environment-values", type=input_file, metavar="FILE",
        help="the values of the Pulumi ESC environments the stack file imports (`environment:`), as `esc open "
             "ORG/ENV --format json > FILE` prints them: its pulumiConfig merges into the stack's config, the "
             "stack file's own values winning; every value is kept secret, and a value the program reads from "
             "it as text is unknown to the rules (default: not read, as the output says first; a key the stack "
             "file does not set is then unknown, or missing where the program requires it)")


def run_options(args) -> dict:
    from pubsubguard.core.recorder import Limits

    return {
        "python": args.python, "pass_env": tuple(args.pass_env), "require_isolation": args.require_isolation,
        "limits": Limits(max_resources=args.max_resources, max_input_bytes=args.max_input_bytes,
                         timeout_s=args.timeout, memory_mib=args.memory_limit),
    }
