"""Hypothesis strategies for message histories, plans, tool schemas and fault plans."""

from __future__ import annotations


def _hypothesis_setup_hook() -> None:
    """Called by Hypothesis through its ``hypothesis`` entry point."""
