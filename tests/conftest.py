pytest_plugins = ["tests.support.azurite"]
