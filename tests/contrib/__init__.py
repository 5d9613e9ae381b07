"""celery_hashbeat.contrib: the console in the Django admin."""
