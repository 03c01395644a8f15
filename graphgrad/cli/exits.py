"""Exit codes: decided here, and nowhere else (``graphgrad --help`` shows them)."""

from ..errors import UsageError

SUCCESS = 0
FAILURE = 1  # an error; for check, a gradient that is not usable; for diff, files that differ
USAGE = 2  # the call is wrong; for diff, a file that cannot be read (as diff(1) says trouble)
NOT_VALID = 3  # attack: the figure is no evaluation (a blocked or masked gradient)
INTERRUPTED = 130  # Ctrl-C: the shell's code for SIGINT

HELP = """\b
Exit codes:
  0  success
  1  an error: a file that cannot be read or written, a bad gradient spec,
     a rule that selects nothing, an override that would be replaced without --force
  2  wrong usage (unknown option, missing argument, a rule not spelt KEY=GRADIENT,
     -o for several models)
  130  interrupted (Ctrl-C)
  graphgrad diff: 0 equal, 1 different, 2 a file cannot be read
  graphgrad check: 0 every x gets a usable gradient, 1 otherwise, 2 usage errors
  graphgrad attack: 0 an evaluation, 3 not one (the gradient is blocked or
     masked at most images: bypass the defence), 1 an error, 2 usage errors
"""


def for_error(error: Exception, command: str | None = None) -> int:
    """The exit code of a command that ends with graphgrad's ``error``."""
    if isinstance(error, UsageError) or command == "diff":
        return USAGE
    return FAILURE


def for_outcome(outcome: object) -> int:
    """The exit code of a command that ran to its end, from what it returned: False
    (check without usable gradients, diff of different files, a batch with a failed
    file), an exit code of this module (attack's verdict), anything else success."""
    if outcome is False:
        return FAILURE
    return outcome if isinstance(outcome, int) and not isinstance(outcome, bool) else SUCCESS


def for_verdict(valid: bool) -> int:
    """attack's code: an evaluation, or not one."""
    return SUCCESS if valid else NOT_VALID
