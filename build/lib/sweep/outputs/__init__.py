"""Outputs of a study: one module per kind (console, json)."""
