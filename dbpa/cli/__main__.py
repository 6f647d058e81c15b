"""``python -m dbpa.cli``: the ``dbpa`` command."""

from dbpa.cli import app

app()
