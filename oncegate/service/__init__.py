"""The claim service: the contract's decision table, over any store."""
