"""flows: the Prefect flows of dbpa (an audit; drift between scheduled runs)."""

from dbpa._env import configure

configure()
