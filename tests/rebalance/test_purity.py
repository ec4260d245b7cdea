"""rebalance stays pure: importing it loads no Kafka, RocksDB or Spark client."""

from __future__ import annotations

import subprocess
import sys


def test_rebalance_imports_no_io_clients() -> None:
    code = (
        "import sys, rebalance; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'confluent_kafka', 'rocksdict', 'pyspark', 'framework', 'statestore'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
