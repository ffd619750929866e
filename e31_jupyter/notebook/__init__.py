"""The notebook side: a cell or a notebook turned into a job's work, the checks made when it is
submitted, and values captured in one kernel and loaded in another."""
