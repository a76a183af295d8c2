"""Builds the Power Platform connector in ``connector/`` from the code: ``python -m tools.connector``.

- ``build``: the definition, from the app's own routes, writing or checking the files;
- ``operations``: the operation table's entries (with their designer text) by the app's function name;
- ``schemas``: request and response bodies from the models, with the text each field carries;
- ``icon``: draws ``connector/icon.png`` (``python -m tools.connector.icon``).
"""
