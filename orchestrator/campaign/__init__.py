"""Campaigns: one change rolled over clusters in stages, with gates (spec, types, client)."""
