"""The pure scheduling core: the job model (request, spec, states), policies, machines, run-time
estimates, fair share, the queue order, the forecast and the simulator. No clock, no I/O: the
live queue and the simulator run the same code."""
