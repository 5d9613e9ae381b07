"""An unmanaged model: no table and no migration, since the store holds the entries. It gives the
admin its "Hashbeat entries" page and Django its permissions: view, change (pause, resume,
remove) and trigger."""

from __future__ import annotations

from django.db import models


class Entry(models.Model):  # type: ignore[misc]  # Django has no stubs here
    name = models.CharField(max_length=200, primary_key=True)

    class Meta:
        managed = False
        db_table = "hashbeat_entry_not_a_table"
        verbose_name = "Hashbeat entry"
        verbose_name_plural = "Hashbeat entries"
        default_permissions = ("view", "change")
        permissions = (("trigger_entry", "Can trigger a run of a hashbeat entry"),)

    def __str__(self) -> str:
        return str(self.name)
