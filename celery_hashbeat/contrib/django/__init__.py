"""The console in the Django admin (docs/console.md, docs/design.md §18).

``INSTALLED_APPS += ["celery_hashbeat.contrib.django"]`` adds "Hashbeat entries" to the admin: the
console's list and actions, behind Django's users, permissions (view, change, trigger) and CSRF.
The store stays the truth: the model is unmanaged (no table, no migration), only a name for
Django's permissions and the admin's menu. ``HASHBEAT_CELERY_APP`` (a Celery app, or its
``"module:attribute"``) names the app; Celery's current app is the default."""
