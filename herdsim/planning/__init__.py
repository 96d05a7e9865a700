"""Planning a run before it starts: what it will cost (:mod:`herdsim.planning.estimate`)."""
