"""The one error type a user's mistake raises: it names the file, the field and the problem."""

from __future__ import annotations


class ScenarioError(Exception):
    """A scenario (or an override of it) is invalid.

    ``problems`` holds ``(field, message)`` pairs; ``str()`` gives one line per problem,
    each naming the source file and the dotted field path.
    """

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None):
        self.problems = problems
        self.source = source
        super().__init__(str(self))

    def __reduce__(self):  # picklable across worker processes
        return (ScenarioError, (self.problems, self.source))

    def __str__(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(
            f"{prefix}{field}: {message}" if field else f"{prefix}{message}"
            for field, message in self.problems
        )
