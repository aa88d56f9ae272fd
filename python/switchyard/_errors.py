"""The package's exceptions: every error is a SwitchyardError, typed by where it came from."""
import re
from typing import List, NamedTuple

from ._switchyard import SwitchyardError


class Diagnostic(NamedTuple):
    """One compiler diagnostic: file, line, column, severity and message."""
    file: str
    line: int
    column: int
    severity: str
    message: str


_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): "
                         r"(?P<sev>error|warning|note|remark): (?P<msg>.*)$")


def parse_diagnostics(text: str) -> List[Diagnostic]:
    """The `file:line:col: error: message` lines of a compiler's output."""
    found = []
    for line in text.splitlines():
        m = _DIAGNOSTIC.match(line.strip())
        if m:
            found.append(Diagnostic(m["file"], int(m["line"]), int(m["col"]), m["sev"],
                                    m["msg"]))
    return found


class CompileError(SwitchyardError):
    """The policy did not compile: `diagnostics` holds the compiler's file:line:col
    diagnostics (the message is the compiler's own text)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.diagnostics = parse_diagnostics(message)


class InputError(SwitchyardError, ValueError):
    """An argument of a call is wrong: its name, shape, dtype, device or values."""


class KnobError(InputError):
    """A knob is unknown or breaks one of its rules."""


def retype(error: SwitchyardError, during: str) -> SwitchyardError:
    """The typed form of a runtime error raised while `during` ("compile" or "call")."""
    message = str(error)
    if during == "compile":
        return CompileError(message)
    if message.startswith("knob ") or "knob '" in message or "run-time knobs" in message:
        return KnobError(message)
    return InputError(message)
