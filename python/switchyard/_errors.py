"""The package's exceptions: every error is a SwitchyardError, typed by where it came from."""
import re
from typing import Any, Dict, List, NamedTuple, Optional

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


def _diagnostic(m: "re.Match") -> Diagnostic:
    return Diagnostic(m["file"], int(m["line"]), int(m["col"]), m["sev"], m["msg"])


def parse_diagnostics(text: str) -> List[Diagnostic]:
    """The `file:line:col: error: message` lines of a compiler's output."""
    return [_diagnostic(m) for m in map(_DIAGNOSTIC.match, map(str.strip, text.splitlines()))
            if m]


class CompileError(SwitchyardError):
    """The policy did not compile: `diagnostics` holds the compiler's file:line:col
    diagnostics (the message is the compiler's own text)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.diagnostics = parse_diagnostics(message)


class CompileWarning(UserWarning):
    """A warning of the compiler about a policy that compiled (a knob's default that
    selects every expert, ...); `diagnostic` is its file:line:col Diagnostic. Issued
    when a Router is first compiled or loaded from the cache in a process."""

    def __init__(self, message: str, diagnostic: Diagnostic, knob: Optional[str] = None):
        super().__init__(message)
        self.diagnostic = diagnostic
        #: The knob whose default the warning is about, else None: a caller that sets
        #: that knob can drop the warning (the compiler names it as data).
        self.knob = knob


def compiler_warnings(entries: List[Dict[str, Any]]) -> List[CompileWarning]:
    """The warnings of moe-compile's diagnostics.json (its entries: severity, file,
    line, column, message, knob), each worded as the compiler prints it: the
    file:line:col line, then the source line and a caret under the column."""
    warnings = []
    for entry in entries:
        if entry.get("severity") != "warning":
            continue
        diagnostic = Diagnostic(entry.get("file", ""), int(entry.get("line", 0)),
                                int(entry.get("column", 0)), "warning",
                                entry.get("message", ""))
        text = (f"{diagnostic.file}:{diagnostic.line}:{diagnostic.column}: warning: "
                f"{diagnostic.message}")
        source = _source_line(diagnostic.file, diagnostic.line)
        if source is not None:
            text += f"\n{source}\n{' ' * max(diagnostic.column - 1, 0)}^"
        warnings.append(CompileWarning(text, diagnostic, entry.get("knob")))
    return warnings


def _source_line(path: str, line: int) -> Optional[str]:
    """Line `line` (1-based) of the file at `path`, or None."""
    try:
        with open(path, errors="replace") as f:
            for number, text in enumerate(f, 1):
                if number == line:
                    return text.rstrip("\n")
    except OSError:
        return None
    return None


class InputError(SwitchyardError, ValueError):
    """An argument of a call is wrong: its name, shape, dtype, device or values."""


class KnobError(InputError):
    """A knob is unknown or breaks one of its rules."""


class FileFormatError(InputError):
    """A file read on the call's behalf (config.json, a checkpoint, .npy, a compiled
    policy's manifest or library) is missing, too large or malformed; the message names
    the file."""


class DeviceError(SwitchyardError):
    """A GPU, its driver or a CUDA library the call needs is absent or failed."""


# One class per runtime status code (runtime::StatusCode); the extension raises the
# class registered here, so no caller reads a message to learn what went wrong.
ERROR_CLASSES = {
    "invalid_argument": InputError,
    "invalid_knob": KnobError,
    "bad_file": FileFormatError,
    "compile_failed": CompileError,
    "device": DeviceError,
    "internal": SwitchyardError,
}


def _register() -> None:
    from . import _switchyard
    codes = _switchyard.STATUS_CODES
    missing = set(codes) ^ set(ERROR_CLASSES)
    if missing:  # the extension and the package disagree: a build problem
        raise ImportError(f"switchyard: status codes without a class: {sorted(missing)}")
    _switchyard.set_error_classes({codes[name]: cls for name, cls in ERROR_CLASSES.items()})


_register()
