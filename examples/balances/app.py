"""Account balances: typed records, validation, and dead letters for what cannot be applied.

Input topic ``transactions``: key = the account id, value = JSON
``{"account": "acc-1", "kind": "deposit" | "withdrawal", "amount": 250}`` (amount in cents,
positive). Output topic ``balances``: key = the account id, value = the account's
``Balance`` after the transaction. Records that are not valid JSON, fail validation, or
would overdraw the account go to the dead-letter topic with the reason; the others go on.

Run: splitstate run examples.balances.app:app --all
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from framework import App, KeyState, Output, Record


class Transaction(BaseModel):
    """One deposit or withdrawal."""

    account: str = Field(min_length=1)
    kind: Literal["deposit", "withdrawal"]
    amount: int = Field(gt=0, description="cents")


class Balance(BaseModel):
    """An account's state."""

    account: str
    balance: int = 0
    transactions: int = 0


class InsufficientFundsError(ValueError):
    """A withdrawal larger than the balance."""


app = App(config_file=Path(__file__).with_name("config.yaml"))
app.store("accounts", Balance)


@app.processor(value_type=Transaction)
def apply(record: Record[Transaction], state: KeyState[Balance]) -> Output:
    """Apply a transaction to its account and emit the new balance."""
    tx = record.value
    if tx.account != record.key_text:
        raise ValueError(f"record key {record.key_text!r} differs from account {tx.account!r}")
    current = state.get() or Balance(account=tx.account)
    change = tx.amount if tx.kind == "deposit" else -tx.amount
    if current.balance + change < 0:
        raise InsufficientFundsError(
            f"withdrawal of {tx.amount} exceeds the balance {current.balance} of {tx.account}"
        )
    updated = Balance(
        account=tx.account,
        balance=current.balance + change,
        transactions=current.transactions + 1,
    )
    state.set(updated)
    return Output(updated)
