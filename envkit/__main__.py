from envkit.cli import entry

entry()
