"""Integrations with other frameworks (docs/console.md)."""
