"""The flow file: reading with positions, the model, the language (templates, conditions,
params, fan-out sources) and the contract of a flow job's data. Pure: no I/O."""
