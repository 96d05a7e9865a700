"""The downstream: the models a scenario's ``downstream.model`` names
(:mod:`~herdsim.model.downstream.family`) and the queue model's parts: the core
(admission and call state), its defences, health, service, collapse guard and network."""
