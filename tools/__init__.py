"""Tools for developers, run from the repository root; none of it is deployed (``.funcignore`` leaves it out)."""
