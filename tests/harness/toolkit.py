"""The toolbox the harness tests fuzz agents over: one tool of each resume kind.

- ``search``: reversible (re-running it is harmless);
- ``write_record``: irreversible, honours idempotency keys;
- ``send_email``: irreversible, takes no key (the "unsafe" kind: a crash right after it
  leaves an outcome no agent can know).
"""

from __future__ import annotations

from typing import Literal

from reference_agent.toolbox import Toolbox, tool


@tool()
def search(query: Literal["crash", "resume", "keys"]) -> str:
    """Search the notes."""
    return f"3 notes about {query}"


@tool(irreversible=True, idempotent=True)
def write_record(key: Literal["a", "b"], idempotency_key: str | None = None) -> str:
    """Write a record (honours idempotency keys)."""
    return f"record {key} written"


@tool(irreversible=True)
def send_email(to: Literal["ann", "bob"]) -> str:
    """Send an e-mail (no idempotency key)."""
    return f"mail to {to} sent"


def toolbox() -> Toolbox:
    """A fresh toolbox of the three tools."""
    return Toolbox([search, write_record, send_email])


def safe_toolbox() -> Toolbox:
    """Only tools a correct agent can always settle: reversible or honouring keys."""
    return Toolbox([search, write_record])
