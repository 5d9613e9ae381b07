"""Runs every block of one Markdown file, in order, and collects what went wrong.

How each kind of block is checked:

- ``python`` with ``>>>`` prompts: a doctest (ELLIPSIS and NORMALIZE_WHITESPACE).
- ``python`` without prompts: executed. Every Celery app it leaves behind is then loaded the way
  beat loads it: ``Settings.from_conf`` and the real ``Scheduler`` building every entry, with no
  entry skipped. Blocks of one file share one namespace, which starts with an unconfigured
  ``app``, as the README's first example assumes.
- ``console``: each ``$ command`` runs in a shell in the file's scratch directory (the commands
  there need no server) and its output, stderr included, must match the lines that follow it
  (``...`` stands for anything, such as the current time).
- ``shell`` and unlabelled blocks: commands that start a server or change a machine. The whole
  block must parse (``bash -n``), and every ``celery``, ``hashbeat`` and ``python -m`` command in
  it must be a valid invocation: run with ``--help`` appended, it must exit 0. A ``celery beat
  -S NAME`` must name celery_hashbeat's Scheduler.
- ``ini``: a systemd unit (sections, ``ExecStart`` validated like a shell command).
- ``yaml``: a Kubernetes manifest (structure, container command and probe validated).
- ``text``: output shown for illustration; not run.

Directives, in an HTML comment on the line before a block:

- ``<!-- docs-test: file NAME -->``: the block is also written to NAME in the scratch directory
  (a ``proj.py`` that later commands load with ``-A proj``), and is executed as its own module.
- ``<!-- docs-test: django-settings -->``: the block is a Django settings module; the blocks
  after it see it as ``django.conf.settings``.
"""

from __future__ import annotations

import configparser
import doctest
import os
import re
import shlex
import subprocess
import sys
import types
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from celery import _state as celery_state
from celery.exceptions import FixupWarning
from celery.utils.imports import load_extension_class_names, symbol_by_name

from celery_hashbeat import Scheduler
from celery_hashbeat.entries.fanout import EVERY_WORKER, sub_name
from celery_hashbeat.settings import DEFAULT_STORE_URL, Settings
from celery_hashbeat.store.redis import connect as redis_connect

from .markdown import Block, YamlError, blocks, load_yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
CHECKER = doctest.OutputChecker()
#: What ``-A proj`` loads when a file shows commands without defining its own proj.py.
DEFAULT_PROJ = 'from celery import Celery\n\napp = Celery("proj")\n'
#: Programs whose invocations are validated by running them with ``--help``.
VALIDATED = ("celery", "hashbeat")
CERTIFICATE = re.compile(r"/[\w./-]+\.(?:pem|crt|key)\b")
LANGUAGES = ("python", "console", "shell", "", "ini", "yaml", "text")
#: The modules a Django settings block stands in for (``_install_django_settings``).
DJANGO_MODULES = ("django", "django.conf")


class DocRun:
    """One Markdown file run from top to bottom in a scratch directory."""

    def __init__(self, path: Path, workdir: Path) -> None:
        self.path = path
        self.workdir = workdir
        self.failures: list[str] = []
        self.counts: dict[str, int] = {}
        self.namespace: dict[str, Any] = {
            "__name__": f"docs_{path.stem}",
            "app": Celery("docs", set_as_current=False),
        }
        self.django_settings: types.SimpleNamespace | None = None
        #: Certificate files the file names: they exist for its configuration checks.
        self.certificates = set(CERTIFICATE.findall(path.read_text(encoding="utf-8")))

    def run(self) -> DocRun:
        found = blocks(self.path)
        if not any(b.directive[:2] == ("file", "proj.py") for b in found):
            (self.workdir / "proj.py").write_text(DEFAULT_PROJ)
        with self._sandbox():
            for block in found:
                try:
                    kind = self._kind(block)
                    self.counts[kind] = self.counts.get(kind, 0) + 1
                    getattr(self, f"_{kind}")(block)
                except Exception as exc:  # every failure is reported, with its block
                    self.failures.append(f"{block.where}: {type(exc).__name__}: {exc}")
        return self

    @staticmethod
    def _kind(block: Block) -> str:
        if block.language not in LANGUAGES:
            raise ValueError(
                f"{block.where}: unknown block language {block.language!r}: use one of "
                f"{LANGUAGES} (text for output that is not run)"
            )
        if block.language == "python":
            return "doctest" if block.is_doctest else "python"
        return {"": "shell"}.get(block.language, block.language)

    @contextmanager
    def _sandbox(self) -> Iterator[None]:
        """The file's scratch directory as cwd, and the process left as it was found (the tasks
        its examples declare are shared, so Celery would add them to every app made later)."""
        cwd, environ, modules = Path.cwd(), dict(os.environ), set(sys.modules)
        # A real Django loaded by an earlier test (tests/contrib) is put back as it was.
        real_django = {name: sys.modules[name] for name in DJANGO_MODULES if name in sys.modules}
        shared_tasks = set(celery_state._on_app_finalizers)
        path_class = redis_connect.Path
        redis_connect.Path = self._certificate_path()  # type: ignore[misc]
        os.chdir(self.workdir)
        sys.path.insert(0, str(self.workdir))
        try:
            with warnings.catch_warnings():
                # A Django example sets DJANGO_SETTINGS_MODULE; Django itself is not installed.
                warnings.simplefilter("ignore", FixupWarning)
                yield
        finally:
            os.chdir(cwd)
            sys.path.remove(str(self.workdir))
            os.environ.clear()
            os.environ.update(environ)
            for name in set(sys.modules) - modules:
                origin = getattr(sys.modules[name], "__file__", None) or ""
                if name in DJANGO_MODULES or origin.startswith(str(self.workdir)):
                    del sys.modules[name]
            sys.modules.update(real_django)
            redis_connect.Path = path_class  # type: ignore[misc]
            celery_state._on_app_finalizers.intersection_update(shared_tasks)

    def _certificate_path(self) -> type[Path]:
        named = self.certificates

        class CertificatePath(type(Path())):  # type: ignore[misc]
            def is_file(self) -> bool:
                return str(self) in named or super().is_file()

        return CertificatePath

    # Python ------------------------------------------------------------------------------------

    def _doctest(self, block: Block) -> None:
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.text, {}, block.where, str(block.path), 0)
        test.globs = self.namespace  # shared by the file's blocks, not copied per block
        for example in test.examples:
            example.lineno += block.line
        output: list[str] = []
        runner = doctest.DocTestRunner(optionflags=OPTIONS)
        runner.run(test, out=output.append, clear_globs=False)
        if runner.failures:
            self.failures.append("".join(output))

    def _python(self, block: Block) -> None:
        if block.directive[:1] == ("file",):
            name = block.directive[1]
            (self.workdir / name).write_text(block.text)
            module: dict[str, Any] = {"__name__": Path(name).stem}
            exec(compile(block.text, f"{block.where} ({name})", "exec"), module)
            self._check_apps(module)
            return
        if block.directive == ("django-settings",):
            values: dict[str, Any] = {}
            exec(compile(block.text, block.where, "exec"), values)
            self._install_django_settings(values)
            return
        # Each configuration example stands alone: it configures an app of its own.
        self.namespace["app"] = Celery("docs", set_as_current=False)
        exec(compile(block.text, block.where, "exec"), self.namespace)
        self._check_apps(self.namespace)

    def _install_django_settings(self, values: dict[str, Any]) -> None:
        """Expose the settings as ``django.conf.settings``; ``import django`` keeps failing, as it
        does without Django, so Celery applies no Django fix-ups."""
        settings = types.SimpleNamespace(**{k: v for k, v in values.items() if k.isupper()})
        conf = types.ModuleType("django.conf")
        conf.settings = settings  # type: ignore[attr-defined]
        sys.modules["django"] = None  # type: ignore[assignment]
        sys.modules["django.conf"] = conf
        self.django_settings = settings

    def _check_apps(self, namespace: dict[str, Any]) -> None:
        apps = [value for value in namespace.values() if isinstance(value, Celery)]
        for app in apps:
            check_app(app, self.workdir)
            if self.django_settings is not None:
                check_django_settings(app, self.django_settings)

    # Commands ----------------------------------------------------------------------------------

    def _console(self, block: Block) -> None:
        for command, want in console_commands(block.text):
            got = self.shell(command).stdout
            if not CHECKER.check_output(want, got, OPTIONS):
                self.failures.append(
                    f"{block.where}: $ {command}\n--- expected\n{want}--- got\n{got}"
                )

    def _shell(self, block: Block) -> None:
        syntax = subprocess.run(
            ["bash", "-n"], input=block.text, capture_output=True, text=True, check=False
        )
        if syntax.returncode:
            self.failures.append(f"{block.where}: bash -n: {syntax.stderr.strip()}")
            return
        for command in commands(block.text):
            self.validate(command, block.where)

    def _ini(self, block: Block) -> None:
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.optionxform = str  # type: ignore[assignment,method-assign]
        unit.read_string(block.text)
        missing = {"Unit", "Service", "Install"} - set(unit.sections())
        if missing:
            raise ValueError(f"a systemd unit needs the sections {sorted(missing)}")
        service = unit["Service"]
        for key in ("ExecStart", "Restart"):
            if key not in service:
                raise ValueError(f"[Service] has no {key}=")
        if "WantedBy" not in unit["Install"]:
            raise ValueError("[Install] has no WantedBy=")
        self.validate(shlex.split(service["ExecStart"]), block.where)

    def _yaml(self, block: Block) -> None:
        try:
            documents = load_yaml(block.text)
        except YamlError as exc:
            raise ValueError(f"YAML: {exc}") from None
        deployments = [d for d in documents if d.get("kind") == "Deployment"]
        if not deployments:
            raise ValueError("no Deployment in the manifest")
        for deployment in deployments:
            for argv in check_deployment(deployment):
                self.validate(argv, block.where)

    def _text(self, block: Block) -> None:
        """Illustrative output: shown, not run."""

    # Running -----------------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("HASHBEAT_", "CELERY_", "REDIS_URL", "DJANGO_"))
        }
        env.update(
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            PYTHONPATH=f"{self.workdir}{os.pathsep}{ROOT}",
            COLUMNS="100",
            PYTHONWARNINGS="ignore",
        )
        return env

    def shell(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=self.workdir,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            check=False,
        )

    def validate(self, argv: list[str], where: str) -> None:
        """A celery, hashbeat or python -m invocation must be accepted: run with --help."""
        argv = [Path(argv[0]).name, *argv[1:]] if argv else argv
        program = argv[0] if argv else ""
        is_module = program in ("python", "python3") and argv[1:2] == ["-m"]
        if program not in VALIDATED and not is_module:
            return
        if program == "celery":
            check_scheduler_option(argv)
        result = self.shell(shlex.join([*argv, "--help"]))
        if result.returncode:
            self.failures.append(
                f"{where}: `{shlex.join(argv)}` is not a valid invocation "
                f"(--help exits {result.returncode}):\n{result.stdout[-2000:]}"
            )


def check_app(app: Celery, workdir: Path) -> None:
    """Load the app as beat would: settings checked, every entry built by the real Scheduler."""
    conf = app.conf
    url = conf.get("hashbeat_store_url")
    if url is None or (isinstance(url, str) and url.startswith("sqlite:///")):
        # An SQLite file (the default one too) goes in the scratch directory: an absolute path
        # names a directory of a real host, and a relative one the checkout.
        name = Path(urlsplit(url or DEFAULT_STORE_URL).path).name
        conf.hashbeat_store_url = f"sqlite:///{workdir / name}"
    try:
        Settings.from_conf(conf)
        scheduler = Scheduler(app, lazy=True)
        try:
            scheduler.setup_schedule()
            if scheduler.broken:
                raise ValueError(f"entries the Scheduler skips: {sorted(scheduler.broken)}")
            missing = expected_entries(conf.beat_schedule or {}) - set(scheduler.entries)
            if missing:
                raise ValueError(f"entries the Scheduler did not load: {sorted(missing)}")
            if not scheduler.store_calls.opened:
                raise ValueError("the Scheduler could not open the store")
        finally:
            scheduler.close()
    finally:
        if url is not None:
            conf.hashbeat_store_url = url


def expected_entries(schedule: Mapping[str, Any]) -> set[str]:
    """The entries the Scheduler should hold for ``schedule``: an entry with ``"workers"`` as
    its copies, one per listed worker (docs/design.md §11); a ``"*"`` entry has none until a leader
    takes a census of live workers, which no example does."""
    expected: set[str] = set()
    for name, definition in schedule.items():
        workers = definition.get("workers") if isinstance(definition, Mapping) else None
        if workers is None:
            expected.add(name)
        elif workers != EVERY_WORKER:
            expected.update(sub_name(name, node) for node in workers)
    return expected


def check_django_settings(app: Celery, settings: types.SimpleNamespace) -> None:
    """Every CELERY_* value of the Django settings reaches the app under its Celery name."""
    for name, value in vars(settings).items():
        if (
            name.startswith("CELERY_")
            and app.conf.get(name.removeprefix("CELERY_").lower()) != value
        ):
            raise ValueError(f"the app does not see {name}")
    if not any(name.startswith("CELERY_HASHBEAT_") for name in vars(settings)):
        raise ValueError("the Django settings example sets no CELERY_HASHBEAT_* setting")


def check_scheduler_option(argv: list[str]) -> None:
    """``celery ... beat -S NAME`` must name celery_hashbeat's Scheduler, as beat resolves it."""
    for flag in ("-S", "--scheduler"):
        if flag in argv[:-1]:
            name = argv[argv.index(flag) + 1]
            aliases = dict(load_extension_class_names("celery.beat_schedulers"))
            if symbol_by_name(name, aliases=aliases) is not Scheduler:
                raise ValueError(f"-S {name} is not celery_hashbeat.Scheduler")
            return
    if "beat" in argv:
        raise ValueError(f"`{shlex.join(argv)}` runs beat without -S hashbeat")


def console_commands(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block; a command may continue with ``\\``."""
    pairs: list[tuple[str, str]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"console block: output before any command: {line!r}")
        command = line[2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + lines[index].strip()
        index += 1
        output: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        pairs.append((command, "".join(f"{line}\n" for line in output)))
    return pairs


def commands(text: str) -> list[list[str]]:
    """The simple commands of a shell block: split at ``&&``, ``||``, ``;`` and ``|``, with
    leading ``NAME=value`` assignments dropped."""
    found = []
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        for token in [*lexer, ";"]:
            if token in ("&&", "||", ";", "|", "&"):
                while current and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", current[0]):
                    current.pop(0)
                if current:
                    found.append(current)
                current = []
            else:
                current.append(token)
    return found


def check_deployment(deployment: dict[str, Any]) -> list[list[str]]:
    """A Deployment of several beats: its shape, and the commands it runs (to validate)."""
    if deployment.get("apiVersion") != "apps/v1":
        raise ValueError("a Deployment is apiVersion apps/v1")
    spec = deployment["spec"]
    if not isinstance(spec.get("replicas"), int) or spec["replicas"] < 2:
        raise ValueError("the point of the Deployment is several beats: replicas must be 2 or more")
    labels = spec["template"]["metadata"]["labels"]
    if spec["selector"]["matchLabels"].items() - labels.items():
        raise ValueError("spec.selector.matchLabels does not match the pod template's labels")
    argvs = []
    for container in spec["template"]["spec"]["containers"]:
        argv = [*container.get("command", []), *container.get("args", [])]
        if not argv:
            raise ValueError(f"container {container.get('name')!r} runs no command")
        argvs.append(argv)
        probe = container.get("livenessProbe", {}).get("exec", {}).get("command")
        if probe:
            argvs.append(probe)
    return argvs
