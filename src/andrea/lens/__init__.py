"""Looking inside a network: head-role metrics, verdicts, attention maps, the explorer page, interventions.
Imports attention, models and data; never train or cli."""
