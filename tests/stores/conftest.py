"""Fixtures shared by the store tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def drop_postgres_tables(request: pytest.FixtureRequest) -> Iterator[None]:
    """Leave the shared PostgreSQL database as it was: drop this test's tables.

    Only tests that use ``any_checkpoint_store_url`` have tables of their own; for the
    others this does nothing. Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("drop_postgres_tables")``.
    """
    url = ""
    if "any_checkpoint_store_url" in request.fixturenames:
        url = request.getfixturevalue("any_checkpoint_store_url")
    yield
    if url.startswith("postgresql"):
        from stores.postgresql import PostgresStore

        store = PostgresStore.from_url(url)
        try:
            store.drop_tables()
        finally:
            store.close()
