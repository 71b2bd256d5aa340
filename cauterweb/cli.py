"""The `cauterweb` console script: `cauterweb COMMAND ...` is `manage.py COMMAND ...` (semantics §15)."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["cauterweb", *sys.argv[1:]])
