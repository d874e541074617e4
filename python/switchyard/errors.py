"""The exceptions the package raises.

Every message is the text the ``switchyard`` command prints for the same mistake: a scenario
error names the file, the line and column, and the field; a PTX error shows the source line
with a caret.
"""

from __future__ import annotations

from typing import Optional


class SwitchyardError(Exception):
    """Base class of every error the simulator reports."""


class SwitchyardValueError(SwitchyardError, ValueError):
    """An argument that names nothing the simulator knows (a preset, a kernel, a size,
    a policy or mechanism spec) or is out of range."""


class ScenarioError(SwitchyardError, ValueError):
    """A scenario that could not be loaded.

    ``str(e)`` is the command's message, ``file:line:col: `field`: what``; the parts are
    also attributes (``location``, ``field``, ``what``; ``None`` when the file could not
    be read at all).
    """

    def __init__(
        self,
        message: str,
        location: Optional[str] = None,
        field: Optional[str] = None,
        what: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.location = location
        self.field = field
        self.what = what


class SweepError(SwitchyardError, ValueError):
    """A sweep file that could not be read: ``file:line: `field`: what``, the parts also
    attributes (``location``, ``field``, ``what``)."""

    def __init__(
        self,
        message: str,
        location: Optional[str] = None,
        field: Optional[str] = None,
        what: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.location = location
        self.field = field
        self.what = what


class PtxError(SwitchyardError, ValueError):
    """PTX that did not parse or lower: every diagnostic, with file, line and column."""


class RunError(SwitchyardError, RuntimeError):
    """A run that failed: a kernel's fault, a cycle limit reached, a device error."""
