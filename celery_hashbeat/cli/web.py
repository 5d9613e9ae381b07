"""``hashbeat web``: the console, a web page to see and steer the schedule (docs/console.md)."""

from __future__ import annotations

import click

from celery_hashbeat.cli.changes import Refused
from celery_hashbeat.cli.loading import app_option, beat_schedule, require_app
from celery_hashbeat.cli.output import SetupError


@click.command("web")
@app_option
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="The TCP port (0: any free one).",
)
def web(app_name: str | None, host: str, port: int) -> None:
    """Serve the console: every entry, its next slots, history and spread, and forms to pause,
    resume, trigger, add, edit and remove. Reading needs nothing; acting needs the token
    (hashbeat_web_token or HASHBEAT_WEB_TOKEN). Listening beyond 127.0.0.1 needs a token.

    \b
    Example:
      HASHBEAT_WEB_TOKEN=s3cret hashbeat web -A proj --port 8000
    """
    try:  # the console's libraries are an extra: the other commands run without them
        from celery_hashbeat.web.app import make_app  # noqa: PLC0415
        from celery_hashbeat.web.serve import ExposedWithoutTokenError, serve  # noqa: PLC0415
    except ImportError as exc:
        raise SetupError(
            f"hashbeat web needs the console's libraries ({exc.name} is missing): "
            f"pip install 'celery-hashbeat[web]'"
        ) from None
    app = require_app(app_name)
    beat_schedule(app)  # the task modules, as the beats import them
    console = make_app(app)
    try:
        serve(console, host, port)
    except ExposedWithoutTokenError as exc:
        raise Refused(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        console.admin.close()
