"""A small, real Celery project scheduled by celery_hashbeat.

``python -m example_project`` runs it: a worker and two beats.
"""
