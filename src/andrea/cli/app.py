"""How every andrea command runs: its refusals are one line on stderr, `<command>: error: <what and
the fix>` (a SettingError for a command's own settings).

`run_app` runs a `@hydra.main` function so that Hydra's own refusals (an override it
cannot apply, an unknown group option, unparsable syntax) read like andrea's and exit 2
instead of Hydra's multi-line report, and so that disk trouble (a read-only or full run
dir) and a sweep with failed jobs end in one line too. Anything else is a bug and keeps
its traceback. With HYDRA_FULL_ERROR=1 set by the user, Hydra's errors keep theirs as well.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import yaml
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException


class SettingError(ValueError):
    """A command's setting refused before any work: one line that names it and the fix."""


class RunFailed(RuntimeError):
    """A run or a sweep that stopped on the way, for a reason its one line says: exit 1."""


DISK = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR)


def fail(command: str, message: str, code: int) -> NoReturn:
    print(f"{command}: error: {message}", file=sys.stderr)
    sys.exit(code)


def one_line(err: BaseException) -> str:
    """Hydra's message on one line, without the config search path it appends."""
    text = " ".join(str(err).split()).split(" Config search path:")[0]
    cause = err.__cause__
    if text.startswith("Error merging override") and cause is not None:  # the why is in OmegaConf's error
        text += ": " + str(cause).splitlines()[0]
    override = getattr(err, "override", None)  # an override Hydra could not parse
    return f"{override}: {text}" if isinstance(override, str) and override not in text else text or type(err).__name__


def plugin_warnings() -> list[str]:
    """One line per installed andrea plugin entry point that cannot be loaded (or, a mechanism, built), a mixer's
    included, and per YAML file of a plugin's config package that cannot be read. With no plugin installed,
    nothing is loaded: andrea's own registries (and torch) stay unimported, and `--help` answers at once."""
    if not plugin_groups():
        return []
    from andrea.attention.registry import broken_plugins
    from andrea.mixers.layers import broken_mixers

    return broken_plugins() + broken_mixers() + plugin_config_problems()


def plugin_groups() -> set[str]:
    """The entry-point groups of andrea's (`andrea.*`) that installed packages fill: only plugins fill them."""
    from importlib.metadata import entry_points

    return {group for group in entry_points().groups if group.startswith("andrea.")}


def plugin_config_problems() -> list[str]:
    """One line per YAML file of an installed plugin's config package (entry-point group `andrea.conf`) that is
    not valid YAML: Hydra would otherwise stop with the parser's traceback when the option is chosen."""
    from pathlib import Path

    import yaml

    from andrea.core.plugins import package_of
    from hydra_plugins.andrea_configs import found_config_packages

    lines = []
    for entry_point, spec in found_config_packages():  # a missing package: broken_plugins names it
        for folder in spec.submodule_search_locations or []:
            for path in sorted(Path(folder).rglob("*.yaml")):
                try:
                    yaml.safe_load(path.read_text())
                except (yaml.YAMLError, OSError, UnicodeDecodeError) as err:
                    where = path.relative_to(folder).with_suffix("")
                    lines.append(
                        f"plugin config '{where}' of package {package_of(entry_point)} cannot be read: "
                        f"{' '.join(str(err).split())}; fix its YAML, or uninstall the package"
                    )
    return lines


def run_app(command: str, hydra_main: Callable[[], Any], help_text: Callable[[], str] | None = None) -> Any:
    """Run a Hydra app as andrea's commands do: plugins registered, refusals in one line; `--help` answered from
    `help_text` where the command gives one and no argument touches Hydra's own settings (hydra.help.* included)."""
    from andrea.train import resolvers
    from hydra_plugins import andrea_launchers, andrea_sweeper

    # Hydra scans the hydra_plugins namespace, but not an editable install's part of it: register
    # hydra/launcher=local and slurm, the checked sweeper, and the plugins' config groups, before Hydra builds its
    # search path.
    andrea_launchers.register()
    andrea_sweeper.register()
    resolvers.register()

    if "--help" in sys.argv[1:]:  # a plugin whose options are missing from the help says why
        for line in plugin_warnings():
            print(f"{command}: warning: {line}", file=sys.stderr)
        if help_text is not None and not any("hydra" in argument for argument in sys.argv[1:]):
            print(help_text())
            return None
    with _hydra_raises() as user_wants_traces:
        try:
            return hydra_main()
        except Exception as err:
            refusal = None if user_wants_traces and not _ours(err) else _refusal(err)
            if refusal is None:
                raise
            fail(command, *refusal)


HYDRA_REFUSALS = (ConfigCompositionException, MissingConfigException, OverrideParseException, yaml.YAMLError)


def _ours(err: Exception) -> bool:
    """An error andrea says in one line even under HYDRA_FULL_ERROR=1: its own, not Hydra's or the OS's."""
    from andrea.train.run_dir import DiskError

    return isinstance(err, (DiskError, SettingError, RunFailed)) or not isinstance(err, (*HYDRA_REFUSALS, OSError))


def _refusal(err: Exception) -> tuple[str, int] | None:
    """`err` as one line and an exit code: Hydra's refusal of the config (2), a setting refused by a part Hydra
    runs, a launcher (2), disk trouble or a run stopped on the way (1), Hydra's own writes before any work (2), a
    sweep whose jobs failed (1); None for anything else, a bug that keeps its traceback."""
    from andrea.train import sweep
    from andrea.train.errors import ConfigError
    from andrea.train.run_dir import DiskError, disk_error

    if isinstance(err, HYDRA_REFUSALS):
        return _config_refusal(err), 2
    if isinstance(err, ConfigError) and sweep.failed_sweep_dir(err) is None:  # a sweep refused before any job
        return str(err), 2
    if isinstance(err, (DiskError, SettingError, RunFailed)):
        return str(err), 2 if isinstance(err, SettingError) else 1
    if isinstance(err, OSError):
        written = disk_error(err, "writing the run's files", err.filename or ".")
        return (str(written), 2) if err.errno in DISK else None
    sweep_dir = sweep.failed_sweep_dir(err)
    return None if sweep_dir is None else (sweep.failure_line(sweep_dir, err), 1)  # a job failed: its row says which


def _config_refusal(err: Exception) -> str:
    """Hydra's refusal of a config in one line, with the plugins that may be behind it: an option Hydra cannot
    find may be a plugin's that failed to load, a file that is not YAML a plugin's (andrea's own are tested)."""
    if isinstance(err, yaml.YAMLError):
        return "; ".join(plugin_config_problems()) or f"a config file is not YAML: {one_line(err)}"
    return one_line(err) + "".join(f"; {line}" for line in plugin_warnings())


@contextmanager
def _hydra_raises() -> Iterator[bool]:
    """Hydra raises an app's errors instead of printing them while HYDRA_FULL_ERROR=1 (its only switch):
    set for the app's run, so the report is ours to write. Yields whether the user had set it (then every
    error keeps its traceback); the environment is the user's again afterwards."""
    user_wants_traces = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield user_wants_traces
    finally:
        if not user_wants_traces:
            del os.environ["HYDRA_FULL_ERROR"]
