"""``python -m celery_hashbeat``: the same commands as the ``hashbeat`` script."""

from celery_hashbeat.cli import main

main(prog_name="hashbeat")
