"""``python -m celery_hashbeat``: the same commands as the ``hashbeat`` script."""

from .cli import main

main(prog_name="hashbeat")
