"""Tables: an input declared a table (``App.table``) upserts each key's value, kept in
versions by time in the key's range; processor functions read it as of a record's event time
(``KeyTable``). See docs/concepts/tables.md."""

from framework.tables.apply import Tables, UnreadableRecordError
from framework.tables.spec import TABLE_PREFIX, TableSpec, TableUpsert, table_store
from framework.tables.versions import DamagedTableError, Versions
from framework.tables.view import KeyTable

__all__ = [
    "TABLE_PREFIX",
    "DamagedTableError",
    "KeyTable",
    "TableSpec",
    "TableUpsert",
    "Tables",
    "UnreadableRecordError",
    "Versions",
    "table_store",
]
