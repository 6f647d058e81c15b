"""flows: the Prefect flows of dbpa (an audit; drift between scheduled runs)."""

from dbpa.environment import configure

configure()
