"""The bottom layer: every spec, type and message model, the views, errors, constants and the
backend Protocol. Imports nothing else of trainctl."""
