"""The ways in: the Azure Functions app's HTTP handling, the local server and the CLI."""
