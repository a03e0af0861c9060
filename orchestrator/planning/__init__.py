"""Pure planning code: plain functions over plain data, shared by workflows and the simulator."""
