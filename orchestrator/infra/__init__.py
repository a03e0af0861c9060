"""How trainctl talks to Temporal (connection, client, updates, schedules) and writes its logs.
Imports only contracts."""
