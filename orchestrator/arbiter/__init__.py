"""The capacity arbiter feature: the one owner of each cluster's maintenance budget."""
