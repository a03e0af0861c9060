"""The audit: proves from the event record that every host that left service came back or was
quarantined, with one live owner."""
