"""Shared by every layer, below them all: the exit codes and errors, the one log, the stop path, and the types that
cross the layers (the plan, a failure, an outcome). Imports nothing else of the package."""
