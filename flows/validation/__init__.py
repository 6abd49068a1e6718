"""Validation: every finding of a flow file, from the schema, the graph, templates, limits,
schedules, sub-flows and a trial expansion. Pure: no I/O."""
