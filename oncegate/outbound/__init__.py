"""What OnceGate calls itself: the adapters that reach the targets a Perform once names (issue 34)."""
