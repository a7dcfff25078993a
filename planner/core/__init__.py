"""The ground floor: documents (schema), the compiled Problem/Assignment, errors,
document I/O, the solver protocol and the evaluators. Imports nothing else of the
project, so the device side (executor/) and every floor above can stand on it."""
