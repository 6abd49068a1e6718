"""What runs inside a worker for a flow job: shell and Python tasks, the sub-flow step, and the
hook that resolves a job's upstream data before it runs."""
