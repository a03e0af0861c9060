"""The application on top: CLI, worker, demos, the dev server, metric watchers."""
