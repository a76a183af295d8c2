"""The claim's vocabulary: statuses, records and business keys, free of storage and HTTP."""
