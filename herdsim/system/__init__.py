"""The running process and its surroundings: child processes that die with their parent
(:mod:`~herdsim.system.children`), signals that end a save like Ctrl-C
(:mod:`~herdsim.system.signals`), and progress on stderr (:mod:`~herdsim.system.progress`)."""
