"""The PostgreSQL backend: the store's tables on a PostgreSQL server (psycopg 3).

``pip install 'agui-store[postgres]'``. Nothing here is imported by ``import agui_store``:
the SQLite path needs no driver beyond apsw.
"""

from agui_store.backends.postgres.backend import PostgresBackend

__all__ = ["PostgresBackend"]
