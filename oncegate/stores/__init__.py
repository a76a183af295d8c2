"""Where claims live: the port the claim service needs and one adapter per backend."""
