"""The console (celery_hashbeat.web): its WSGI app and, in a real browser, its pages."""
