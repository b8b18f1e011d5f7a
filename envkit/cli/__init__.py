"""The command line: parsing, the JSON envelope, the console and the views."""
