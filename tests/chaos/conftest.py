"""The team-style suite under ``suite/`` is run by the tests here through pytester, never directly."""

collect_ignore = ["suite"]
