"""The ways in: the Functions app's HTTP handling, routes and timers, and the local server of the same app.

The operator's command is ``oncegate.cli``, which is not deployed.
"""
