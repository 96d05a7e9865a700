"""The ``herdsim`` command line: a thin face over the Python API."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from herdsim.cli import complete, libraries
from herdsim.config import bundled
from herdsim.errors import HerdsimError, OutputDirError, OutputExistsError, UsageError
from herdsim.system import heap, signals

if TYPE_CHECKING:
    from herdsim.config.scenario import Scenario


class Boundary(TyperGroup):
    """The one place where a user's mistake becomes one line on stderr and exit code 2 (a
    run that failed of a bug, :class:`~herdsim.errors.TaskError`, exit code 1), and Ctrl-C
    exit code 130."""

    def invoke(self, ctx: Any):  # typer types it with its own vendored click
        try:
            with signals.as_interrupt():  # TERM and HUP end a command as Ctrl-C does
                return super().invoke(ctx)
        except HerdsimError as exc:
            error_lines(str(exc).splitlines() or [type(exc).__name__])
            raise typer.Exit(getattr(exc, "exit_code", 2)) from None
        except BrokenPipeError:
            if not stdout_gone():
                raise
            sink_stdout()  # a reader that stopped early (| head): not an error
            raise typer.Exit(0) from None
        except OSError as exc:  # the environment said no: the path and the cause
            error_lines([os_problem(exc)])
            raise typer.Exit(2) from None
        except KeyboardInterrupt as exc:
            err_console.print("interrupted: nothing was written")
            raise typer.Exit(128 + getattr(exc, "signum", 2)) from None

    def main(self, *args, **kwargs):
        """Text that the terminal's encoding cannot show is escaped, a closed stdout is a
        sink (said in one line on stderr), a reader that stops early (``| head``) ends
        nothing, a stdout that fails (a full disk, ``/dev/full``) is one line on stderr,
        and libraries' warnings and logs are said through stderr (:mod:`.libraries`)."""
        heap.freeze_at_exit()  # the teardown after a command need not scan the heap
        closed = []
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is None:  # started with the descriptor closed
                setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 (as long as we live)
                closed.append(name)
            elif hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="backslashreplace")
        if "stdout" in closed:
            err_console.print("warning: stdout is closed; what herdsim prints there is "
                              "discarded", highlight=False)
        argv = list(kwargs.get("args") or (args[0] if args else None) or sys.argv[1:])
        words = argv[:argv.index("--")] if "--" in argv else argv
        try:
            with libraries.routed(lambda line: err_console.print(
                    f"warning: {safe(line)}", highlight=False, soft_wrap=True),
                    quiet=bool({"-q", "--quiet"} & set(words))):
                return super().main(*args, **kwargs)
        finally:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                sink_stdout()  # the reader stopped early: what is left goes nowhere
            except OSError as exc:  # only an error line is left to say, and exit code 2
                sink_stdout()
                with contextlib.suppress(OSError):
                    sys.stderr.write(f"error: stdout: {exc.strerror or exc}\n")
                raise SystemExit(2) from None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list with each one's whole first sentence, wrapped, never cut."""
        rows = [(name, command.get_short_help_str(limit=10_000))
                for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def sink_stdout() -> None:
    """From now on what is written to stdout goes nowhere (its reader is gone)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no poll (Windows), no descriptor
        return False


class _Console(Console):
    """A rich console whose broken pipe (stdout's reader gone) is a sink, not an exit."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        if not self.stderr:
            sink_stdout()


def error_lines(lines: list[str]) -> None:
    """Each line on stderr after a red ``error:``."""
    for line in lines:
        err_console.print(f"[bold red]error:[/] {safe(line)}", highlight=False, soft_wrap=True)


def os_problem(exc: OSError) -> str:
    """An ``OSError`` as one line: the path (both, for a rename) and the cause; a write
    with no path is named stdout when it was the console's."""
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    where = " -> ".join(os.fsdecode(p) if isinstance(p, bytes) else str(p) for p in paths)
    if not where:
        tb, where = exc.__traceback__, "writing an output"
        while tb is not None:
            if tb.tb_frame.f_locals.get("self") is console:
                where = "stdout"
                sink_stdout()
                break
            tb = tb.tb_next
    return f"{where}: {exc.strerror or str(exc) or type(exc).__name__}"


app = typer.Typer(
    help="herdsim: simulate retry storms (the thundering herd) before production does.",
    no_args_is_help=True,
    cls=Boundary,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: wrapped, never cut with "…", no <bool> after flags
    context_settings={"help_option_names": ["-h", "--help"]},
)
console = _Console(width=None if sys.stdout and sys.stdout.isatty() else 120)  # pipes: wide
err_console = _Console(stderr=True, emoji=False)

ScenarioArg = Annotated[Path, typer.Argument(
    help="Scenario YAML file, or the name of a bundled one (herdsim scenarios).",
    show_default=False, metavar="SCENARIO", autocompletion=complete.scenarios)]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="PATH=VALUE",
                 help="Override a field: --set retry.strategy=full_jitter (repeatable)."),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", metavar="DIR",
                              help="Output directory (default runs/<name>-<time>).")
]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Run even when the estimate says this machine cannot hold the run.")]
PrometheusOpt = Annotated[
    bool, typer.Option("--prometheus", help="Also write metrics.om (see 'export prometheus').")
]


def safe(text: object) -> str:
    """*text* ready for a rich console: markup escaped, control characters (ANSI escapes,
    NUL, bidi overrides …) shown as ``\\x1b`` rather than sent to the terminal."""
    shown = "".join(ch if ch.isprintable() or ch in "\t\n" else f"\\x{ord(ch):02x}"
                    for ch in str(text))
    return escape(shown)


def parse_sets(sets: list[str] | None) -> dict[str, str]:
    """``["a.b=1", ...]`` -> ``{"a.b": "1"}``; a malformed item is a :class:`UsageError`."""
    overrides = {}
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected path.to.field=value")
        overrides[key.strip()] = value
    return overrides


def load(path: Path, sets: list[str] | None, trust_code: bool = True) -> Scenario:
    """The scenario at *path* (or bundled under that name) with ``--set`` applied;
    ``trust_code=False`` leaves a ``module:Class`` strategy unimported."""
    try:
        overrides = parse_sets(sets)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None
    from herdsim.config.loading import load_scenario  # pydantic: not for --help

    return load_scenario(bundled.resolve(path), overrides, trust_code)


def slug(name: str) -> str:
    """*name* as one safe path component: word characters, ``.`` and ``-``, 80 at most."""
    return re.sub(r"[^\w.-]+", "-", name).strip("-.")[:80] or "run"


NAME_MAX = 255  # bytes in one file name (Linux, macOS and most filesystems)


def output_dir(out: Path | None, name: str) -> Path:
    """The output directory: *out*, or ``runs/<slug of name>-<timestamp>`` (always under
    ``runs/``; ``-2``, ``-3``... when a run of the same second has it). Checked before any
    simulation: it must not exist (not even as a dangling symlink), each name in it must
    fit a file name, and its nearest existing parent must be a directory that takes a new
    folder (tried)."""
    if out is None:
        stamp = Path("runs") / f"{slug(name)}-{datetime.now():%Y%m%d-%H%M%S}"
        out = next(path for n in range(1, 10_000) if not os.path.lexists(
            path := stamp if n == 1 else stamp.with_name(f"{stamp.name}-{n}")))
    if os.path.lexists(out):
        what = "is a dangling symlink" if not out.exists() else "already exists"
        raise OutputExistsError(f"{out}: {what}; choose another --out or remove it")
    parent = out.absolute().parent
    while not os.path.lexists(parent):
        parent = parent.parent
    if not parent.is_dir():
        raise OutputDirError(f"{out}: cannot be created: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputDirError(f"{out}: cannot be created: {parent} is not writable")
    too_long = [part for part in out.parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        raise OutputDirError(f"{out}: cannot be created: the name {too_long[0][:20]}… is "
                             f"{len(os.fsencode(too_long[0]))} bytes (at most {NAME_MAX})")
    try:  # what os.access cannot see: a read-only mount, /proc, a full disk's inodes
        os.rmdir(tempfile.mkdtemp(prefix=f".herdsim-{os.getpid()}-probe-", dir=parent))
    except OSError as exc:
        raise OutputDirError(f"{out}: cannot be created in {parent}: "
                             f"{exc.strerror or exc}") from None
    return out



StrategiesOpt = Annotated[str | None, typer.Option(
    "--strategies", metavar="A,B,...", autocompletion=complete.strategies,
    help="Comma-separated strategies to compare (default: every built-in; with --vary "
         "alone, the scenario's own strategy).",
    show_default=False)]
VaryOpt = Annotated[list[str] | None, typer.Option(
    "--vary", metavar="PATH=V1,V2",
    help="Try several values of a field: --vary breaker.enabled=false,true "
                   "(repeatable; arms are every strategy or preset x every combination; "
                   "without --strategies or --presets, the scenario's own strategy alone).")]
ProcessesOpt = Annotated[int | None, typer.Option(
    "--processes", min=1, metavar="N", help="Parallel processes (default: all cores).",
    show_default=False)]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", envvar="HERDSIM_SCHEDULER", metavar="ADDRESS",
    help="Run on Dask: tcp://HOST:8786, or 'local' for a LocalCluster.")]
LocalProcessesOpt = Annotated[int | None, typer.Option(  # beside --scheduler
    "--processes", min=1, metavar="N",
    help="Local processes (default: every core; 1 = serial).", show_default=False)]
FORMAT = "png"  # the one default of every command that draws figures
FormatOpt = Annotated[str, typer.Option(
    "--format", metavar="FORMATS", help="Figure formats, comma-separated: png, svg, pdf.")]
OutputDirArg = Annotated[Path, typer.Argument(
    help="Output directory of 'herdsim run' or 'herdsim compare'.", show_default=False,
    metavar="DIR")]


def parse_list(option: str, text: str | None) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; an empty list is a :class:`UsageError`."""
    items = [item.strip() for item in (text or "").split(",") if item.strip()]
    if text is not None and not items:
        raise UsageError(f"{option} {text!r}: expected a comma-separated list")
    return items


def parse_vary(items: list[str] | None) -> dict[str, list[str]]:
    """``["a.b=1,2"]`` -> ``{"a.b": ["1", "2"]}`` (values parsed later as YAML scalars)."""
    vary: dict[str, list[str]] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise UsageError(f"--vary {item!r}: expected path.to.field=value1,value2,...")
        if key.strip() in vary:
            raise UsageError(f"--vary {key.strip()}: given twice")
        vary[key.strip()] = parse_list(f"--vary {key.strip()}=", values)
    return vary


FORMATS = ("png", "svg", "pdf")


def parse_formats(text: str) -> list[str]:
    formats = parse_list("--format", text)
    wrong = [f for f in formats if f not in FORMATS]
    if wrong:
        raise UsageError(f"--format {','.join(wrong)}: choose among {', '.join(FORMATS)}")
    return formats


RunDirArg = Annotated[Path, typer.Argument(help="Output directory of 'herdsim run' or "
                                                "'herdsim compare'.", show_default=False,
                                           metavar="DIR")]
StartOpt = Annotated[str | None, typer.Option(
    "--start", metavar="TIME", help="Unix time (s) or ISO date-time of the run's t=0 "
                    "(default: now minus the run's duration).", show_default=False)]
IntervalOpt = Annotated[str | None, typer.Option(
    "--interval", metavar="DURATION",
    help="Sample every DURATION (a multiple of the bin, e.g. 1s; default: the bin).",
    show_default=False)]
ReplicationOpt = Annotated[int, typer.Option(
    "--replication", metavar="N", help="Which replication of a comparison to export.")]



def _version(value: bool) -> None:
    if value:
        import herdsim

        console.print(f"herdsim {herdsim.__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(_: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print herdsim's version and exit.")] = False) -> None:
    """herdsim: simulate retry storms (the thundering herd) before production does."""


JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print the summary as JSON on stdout and nothing else there "
                   "(tables and progress go away, messages to stderr).")]
QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No table, no progress; only errors (and --json's output).")]
ExplainOpt = Annotated[bool, typer.Option(
    "--explain", help="Under the table, the KPI registry's definition of every number "
                      "shown (herdsim kpis lists them all).")]
FailIfOpt = Annotated[list[str] | None, typer.Option(
    "--fail-if", metavar="'KPI OP VALUE'",
    help="Exit with code 3 when the condition holds, e.g. --fail-if 'state != recovered' "
         "--fail-if 'goodput < 0.9' (repeatable; KPIs as in summary.json; on a comparison: "
         "for any arm).")]


def emit_json(data: object) -> None:
    """*data* as JSON on stdout, alone (NaN and missing values as null); a reader gone
    (``| head``) ends nothing."""
    text = json.dumps(data, indent=2, default=_plain, allow_nan=False)
    try:
        typer.echo(text)
    except BrokenPipeError:
        sink_stdout()


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def gate(failures: list[str]) -> None:
    """Exit with code 3 (after saying why on stderr) when a --fail-if condition held."""
    for line in failures:
        err_console.print(f"[bold red]{escape(line)}[/]", highlight=False, soft_wrap=True)
    if failures:
        raise typer.Exit(3)


def main() -> None:
    """The console script and ``python -m herdsim``."""
    app(prog_name="herdsim")
