"""The Azure store: claims, their history, conflicts, the inventory and the key secrets in Azure Table Storage.

``store.TableStore`` is the store; each of its ports is a module of its own over the shared ``entities``,
``errors`` and ``batch`` (see ``store``).
"""
