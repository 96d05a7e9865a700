"""The fluid (mean-field) model: a scenario's mean flows integrated on a time grid, beside
the simulation (``herdsim predict``). No SimPy: it reads the scenario and asks the family
members for their fluid forms."""
