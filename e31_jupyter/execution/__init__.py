"""Execution: where a job runs (backends), what runs inside it (the worker), its folder, what it
hands back, its environment, the GPU inventory and the Unix accounts jobs run as."""
