"""The one execution core: how a plan is carried out, shared by the train's domains, the bulk
operation's waves and the discrete-event simulator (drain tracking, install with retries,
verify-and-settle, visit cycles, the halting rule), over the fleet-backend interface."""
