"""tasks: thin Prefect tasks around dbpa and storage (sample, embed, test, correct, report)."""

from dbpa.environment import configure

configure()
